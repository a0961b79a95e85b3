//! Planning a run: which of the survey's sessions it scores, which it counts as already done
//! or skipped, and the passes that bound how many events a scan holds in memory. A forced run
//! reads the whole survey; any other reads only its unscored sessions (and counts the rest
//! from an index), so that its cost follows what changed since the last run.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};

use catalog::{RunId, ScoredReference, ScoringRun, SessionIdentity, UnscoredSessions};

use super::{Scorer, Stop};

#[derive(Debug, Clone)]
pub(super) struct PlannedSession {
    pub(super) reference: String,
    pub(super) identifiers: Vec<String>,
    pub(super) events: u64,
    /// When the collector received its first and last batch, over all its browser sessions;
    /// `None` when one of them is not known (the scan then reads every file for it).
    pub(super) received: Option<(i64, i64)>,
    /// An earlier run scored it: the survey's cohort spread counts it already.
    pub(super) scored_before: bool,
}

#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) total: u64,
    pub(super) already_scored: u64,
    pub(super) skipped: u64,
    pub(super) sessions: Vec<PlannedSession>,
}

/// Browser sessions grouped by reference, in reference order; those without a reference are
/// left out (nobody can look them up, so they are not scored).
fn by_reference(identities: Vec<SessionIdentity>) -> BTreeMap<String, PlannedSession> {
    let mut by_reference: BTreeMap<String, PlannedSession> = BTreeMap::new();
    for identity in identities {
        let Some(reference) = identity.reference else {
            continue;
        };
        match by_reference.entry(reference) {
            Entry::Vacant(entry) => {
                let reference = entry.key().clone();
                entry.insert(PlannedSession {
                    reference,
                    identifiers: vec![identity.identifier],
                    events: identity.event_count,
                    received: identity.received,
                    scored_before: false,
                });
            }
            Entry::Occupied(mut entry) => {
                let session = entry.get_mut();
                session.identifiers.push(identity.identifier);
                session.events += identity.event_count;
                session.received = session
                    .received
                    .zip(identity.received)
                    .map(|(a, b)| (a.0.min(b.0), a.1.max(b.1)));
            }
        }
    }
    by_reference
}

/// Sessions to score again (their cohort cluster grew), from their browser sessions.
pub(super) fn rescored(identities: Vec<SessionIdentity>) -> Vec<PlannedSession> {
    by_reference(identities)
        .into_values()
        .map(|session| PlannedSession {
            scored_before: true,
            ..session
        })
        .collect()
}

impl Plan {
    /// The plan of a forced run `run` over every browser session of a survey, given the
    /// references that have a score and the run that wrote each: sessions are grouped by
    /// reference, in reference order.
    fn forced(identities: Vec<SessionIdentity>, scored: Vec<ScoredReference>, run: &RunId) -> Plan {
        let by_reference = by_reference(identities);
        let scored: HashMap<String, String> = scored
            .into_iter()
            .map(|s| (s.reference, s.run_id))
            .collect();
        let mut plan = Plan {
            total: by_reference.len() as u64,
            ..Plan::default()
        };
        for (reference, mut session) in by_reference {
            match scored.get(&reference) {
                Some(run_id) if run_id == run.as_str() => plan.already_scored += 1,
                Some(_) => {
                    session.scored_before = true;
                    plan.sessions.push(session);
                }
                None => plan.sessions.push(session),
            }
        }
        plan
    }

    /// The plan of a run that is not forced: the survey's unscored sessions and those whose
    /// acknowledged events grew past the ones their score was computed from, the rest counted
    /// as skipped (or, those the run itself scored, as done).
    fn incremental(unscored: UnscoredSessions) -> Plan {
        let mut sessions = by_reference(unscored.sessions);
        let grown = by_reference(unscored.grown);
        let again = grown.len() as u64;
        for (reference, session) in grown {
            sessions.insert(
                reference,
                PlannedSession {
                    scored_before: true,
                    ..session
                },
            );
        }
        Plan {
            total: unscored.references,
            already_scored: unscored.scored_by_run,
            skipped: unscored
                .scored
                .saturating_sub(unscored.scored_by_run)
                .saturating_sub(again),
            sessions: sessions.into_values().collect(),
        }
    }

    /// Splits the sessions to score into passes of at most `max_events` events each (a session
    /// larger than that gets a pass of its own).
    pub(super) fn passes(&self, max_events: u64) -> Vec<Vec<&PlannedSession>> {
        passes_of(&self.sessions, max_events)
    }
}

/// `sessions` in passes of at most `max_events` events each (a session larger than that gets a
/// pass of its own).
pub(super) fn passes_of(sessions: &[PlannedSession], max_events: u64) -> Vec<Vec<&PlannedSession>> {
    let mut passes = Vec::new();
    let mut current = Vec::new();
    let mut events = 0u64;
    for session in sessions {
        if !current.is_empty() && events + session.events > max_events {
            passes.push(std::mem::take(&mut current));
            events = 0;
        }
        events += session.events;
        current.push(session);
    }
    if !current.is_empty() {
        passes.push(current);
    }
    passes
}

/// One live `events` file of the survey, with its `received_at` range when the table's log
/// gives one.
#[derive(Debug, Clone)]
pub(super) struct EventsFile {
    pub(super) path: String,
    pub(super) received: Option<(i64, i64)>,
}

/// The files a pass reads: those whose `received_at` range meets one of its sessions' (every
/// file, when a session's range is not known; a file without a range is always read). A
/// session's rows were all received inside its range, so no file left out holds one of them.
pub(super) fn pass_files(files: &[EventsFile], pass: &[&PlannedSession]) -> Vec<String> {
    let mut ranges: Vec<(i64, i64)> = Vec::with_capacity(pass.len());
    for session in pass {
        match session.received {
            Some(range) => ranges.push(range),
            None => return files.iter().map(|file| file.path.clone()).collect(),
        }
    }
    ranges.sort_unstable();
    // Merged, so that they are sorted by their ends as well as their starts.
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
    for (first, last) in ranges {
        match merged.last_mut() {
            Some(previous) if first <= previous.1 => previous.1 = previous.1.max(last),
            _ => merged.push((first, last)),
        }
    }
    files
        .iter()
        .filter(|file| {
            let Some((low, high)) = file.received else {
                return true;
            };
            // The first range that ends at or after the file's first row: it meets the file
            // when it starts at or before the file's last row.
            let at = merged.partition_point(|&(_, last)| last < low);
            merged.get(at).is_some_and(|&(first, _)| first <= high)
        })
        .map(|file| file.path.clone())
        .collect()
}

impl Scorer {
    /// Which sessions the run scores, and how many it counts as skipped or already done.
    pub(super) async fn plan(&self, run: &ScoringRun) -> Result<Plan, Stop> {
        if run.force {
            // Every session of the survey: the cost of a forced run is the survey's.
            let identities = self.catalog.survey_sessions(&run.survey_id).await?;
            let scored = self.catalog.scored_references(&run.survey_id).await?;
            return Ok(Plan::forced(identities, scored, &run.id));
        }
        // In proportion to the unscored sessions (issue 56), not the survey.
        let unscored = self
            .catalog
            .unscored_sessions(&run.survey_id, &run.id)
            .await?;
        Ok(Plan::incremental(unscored))
    }
}

#[cfg(test)]
mod tests;
