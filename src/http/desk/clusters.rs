//! A survey's clusters as the desk shows them, drawn once per change of the survey.
//!
//! Drawing the groups reads every clustered session's place and compares them
//! (`scorer::cohort::groups`): tens of milliseconds for a farm of thousands, half a second for
//! a survey that is mostly one farm. Every summary and every page of the list needs them, so
//! they are kept per survey with what they were drawn from ([`catalog::DeskVersion`]: the
//! survey's runs started and ended and its tombstones, counts that only grow). Only a run or an
//! erasure changes the clusters, and both change that key (a run that publishes in several
//! passes changes it when it ends: until then the desk shows the clusters as of its first
//! request during the run); each request reads the key (three indexed counts) and draws again
//! only when it moved. One request a survey draws at a time; the others wait for its result. In
//! a fleet every instance keeps its own, and the key is read from the shared catalog, so an
//! erasure on one instance is seen by every other at its next request.

use std::collections::HashMap;
use std::sync::Arc;

use catalog::{Catalog, DeskVersion, SurveyId};
use scorer::cohort::groups::{Group, groups};

use super::super::ApiError;

/// Surveys whose clusters are kept at once; past it the least recently used is dropped.
const KEPT_SURVEYS: usize = 64;

/// A survey's clusters, and each member's cluster by reference (what names a list's rows).
#[derive(Debug, Default)]
pub struct Clusters {
    pub groups: Vec<Group>,
    pub cluster_of: HashMap<String, String>,
}

impl Clusters {
    fn new(groups: Vec<Group>) -> Self {
        let mut cluster_of = HashMap::new();
        for group in &groups {
            let id = group.id();
            for member in &group.members {
                cluster_of.insert(member.clone(), id.clone());
            }
        }
        Clusters { groups, cluster_of }
    }
}

struct Entry {
    drawn: DeskVersion,
    clusters: Arc<Clusters>,
    used: u64,
}

#[derive(Default)]
struct Kept {
    clock: u64,
    entries: HashMap<SurveyId, Entry>,
    /// One drawing at a time a survey.
    turns: HashMap<SurveyId, Arc<tokio::sync::Mutex<()>>>,
}

/// The clusters of the surveys the desk was asked about lately.
#[derive(Default)]
pub struct DeskClusters {
    kept: parking_lot::Mutex<Kept>,
}

impl DeskClusters {
    /// The survey's clusters as of now: kept ones if nothing changed since they were drawn.
    pub async fn of(
        &self,
        catalog: &Arc<dyn Catalog>,
        survey: &SurveyId,
    ) -> Result<Arc<Clusters>, ApiError> {
        let version = catalog.desk_version(survey).await?;
        let turn = {
            let mut kept = self.kept.lock();
            if let Some(clusters) = kept.current(survey, version) {
                return Ok(clusters);
            }
            kept.turns.entry(survey.clone()).or_default().clone()
        };
        let _turn = turn.lock().await;
        // Drawn by the request this one waited for?
        if let Some(clusters) = self.kept.lock().current(survey, version) {
            return Ok(clusters);
        }
        let places = catalog.clustered_places(survey).await?;
        // Comparing places is CPU work: off the request threads.
        let clusters = tokio::task::spawn_blocking(move || Clusters::new(groups(&places)))
            .await
            .map_err(|e| ApiError::internal("could not draw the survey's clusters", e))?;
        let clusters = Arc::new(clusters);
        self.kept.lock().keep(survey, version, clusters.clone());
        Ok(clusters)
    }
}

impl Kept {
    fn current(&mut self, survey: &SurveyId, version: DeskVersion) -> Option<Arc<Clusters>> {
        self.clock += 1;
        let clock = self.clock;
        let entry = self.entries.get_mut(survey)?;
        if entry.drawn != version {
            return None;
        }
        entry.used = clock;
        Some(entry.clusters.clone())
    }

    fn keep(&mut self, survey: &SurveyId, drawn: DeskVersion, clusters: Arc<Clusters>) {
        self.clock += 1;
        if self.entries.len() >= KEPT_SURVEYS
            && !self.entries.contains_key(survey)
            && let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.used)
                .map(|(id, _)| id.clone())
        {
            self.entries.remove(&oldest);
        }
        // Turns nobody waits on are dropped with the surveys they served.
        let entries = &self.entries;
        self.turns
            .retain(|id, turn| Arc::strong_count(turn) > 1 || entries.contains_key(id));
        self.entries.insert(
            survey.clone(),
            Entry {
                drawn,
                clusters,
                used: self.clock,
            },
        );
    }
}
