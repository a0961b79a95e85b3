//! Planning a run: which of the survey's sessions it scores, which it counts as already done
//! or skipped, and the passes that bound how many events a scan holds in memory.

use std::collections::{BTreeMap, HashMap};

use catalog::{RunId, ScoredReference, ScoringRun, SessionIdentity};

use super::{Scorer, Stop};

#[derive(Debug, Clone)]
pub(super) struct PlannedSession {
    pub(super) reference: String,
    pub(super) identifiers: Vec<String>,
    pub(super) events: u64,
    /// An earlier run scored it: the survey's cohort spread counts it already.
    pub(super) scored_before: bool,
}

#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) total: u64,
    pub(super) already_scored: u64,
    pub(super) skipped: u64,
    pub(super) sessions: Vec<PlannedSession>,
    /// Sessions an earlier run scored, skipped: a run scores one again when its cluster in the
    /// survey's cohort grows.
    pub(super) skipped_sessions: HashMap<String, PlannedSession>,
}

impl Plan {
    /// The plan of run `run` over a survey's browser sessions, given the references that have a
    /// score and the run that wrote each: sessions are grouped by reference, in reference
    /// order.
    fn new(
        identities: Vec<SessionIdentity>,
        scored: Vec<ScoredReference>,
        run: &RunId,
        force: bool,
    ) -> Plan {
        let mut by_reference: BTreeMap<String, PlannedSession> = BTreeMap::new();
        for identity in identities {
            let Some(reference) = identity.reference else {
                // Without a reference nobody can look the session up; it is not scored.
                continue;
            };
            let entry = by_reference
                .entry(reference.clone())
                .or_insert_with(|| PlannedSession {
                    reference,
                    identifiers: Vec::new(),
                    events: 0,
                    scored_before: false,
                });
            entry.identifiers.push(identity.identifier);
            entry.events += identity.event_count;
        }
        let scored: HashMap<String, String> = scored
            .into_iter()
            .map(|s| (s.reference, s.run_id))
            .collect();
        let mut plan = Plan {
            total: by_reference.len() as u64,
            ..Plan::default()
        };
        for (reference, mut session) in by_reference {
            session.scored_before = scored.contains_key(&reference);
            match scored.get(&reference) {
                Some(run_id) if run_id == run.as_str() => plan.already_scored += 1,
                Some(_) if !force => {
                    plan.skipped += 1;
                    plan.skipped_sessions.insert(reference, session);
                }
                _ => plan.sessions.push(session),
            }
        }
        plan
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

impl Scorer {
    /// Which sessions the run scores, and how many it counts as skipped or already done.
    pub(super) async fn plan(&self, run: &ScoringRun) -> Result<Plan, Stop> {
        let identities = self.catalog.survey_sessions(&run.survey_id).await?;
        let scored = self.catalog.scored_references(&run.survey_id).await?;
        Ok(Plan::new(identities, scored, &run.id, run.force))
    }
}

#[cfg(test)]
mod tests;
