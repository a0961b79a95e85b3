//! A survey's clusters as the desk shows them, drawn once per change of the survey.
//!
//! Drawing the groups reads every clustered session's place and compares them
//! (`scorer::cohort::groups`): tens of milliseconds for a farm of thousands, and more than the
//! desk's budget for a survey that is mostly one farm. Every summary and every page of the list
//! needs them, so they are kept per survey with what they were drawn from: the survey's latest
//! scoring run (its id, status and completion) and how many of its references were ever erased.
//! Only a run or an erasure changes the clusters, and both change that key; each request reads
//! the key (two indexed lookups) and draws again only when it moved. In a fleet every instance
//! keeps its own, and the key is read from the shared catalog, so an erasure on one instance is
//! seen by every other at its next request.

use std::collections::HashMap;
use std::sync::Arc;

use catalog::{Catalog, SurveyId};
use scorer::cohort::groups::{Group, groups};

use super::super::ApiError;

/// Surveys whose clusters are kept at once; past it the least recently used is dropped.
const KEPT_SURVEYS: usize = 64;

/// What a survey's clusters were drawn from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Drawn {
    run: Option<(String, String, Option<i64>)>,
    erased: u64,
}

struct Entry {
    drawn: Drawn,
    groups: Arc<Vec<Group>>,
    used: u64,
}

/// The clusters of the surveys the desk was asked about lately.
#[derive(Default)]
pub struct DeskClusters {
    kept: parking_lot::Mutex<(u64, HashMap<SurveyId, Entry>)>,
}

impl DeskClusters {
    /// The survey's clusters as of now: kept ones if nothing changed since they were drawn.
    pub async fn of(
        &self,
        catalog: &Arc<dyn Catalog>,
        survey: &SurveyId,
    ) -> Result<Arc<Vec<Group>>, ApiError> {
        let (run, erased) = tokio::try_join!(
            catalog.latest_scoring_run(survey),
            catalog.erased_references(survey)
        )?;
        let drawn = Drawn {
            run: run.map(|run| {
                (
                    run.id.to_string(),
                    run.status.as_str().to_owned(),
                    run.completed_at,
                )
            }),
            erased,
        };
        {
            let mut kept = self.kept.lock();
            let (clock, entries) = &mut *kept;
            *clock += 1;
            if let Some(entry) = entries.get_mut(survey)
                && entry.drawn == drawn
            {
                entry.used = *clock;
                return Ok(entry.groups.clone());
            }
        }
        let places = catalog.clustered_places(survey).await?;
        // Comparing places is CPU work: off the request threads.
        let drawn_groups = tokio::task::spawn_blocking(move || groups(&places))
            .await
            .map_err(|e| ApiError::internal("could not draw the survey's clusters", e))?;
        let drawn_groups = Arc::new(drawn_groups);
        let mut kept = self.kept.lock();
        let (clock, entries) = &mut *kept;
        *clock += 1;
        if entries.len() >= KEPT_SURVEYS
            && !entries.contains_key(survey)
            && let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, entry)| entry.used)
                .map(|(id, _)| id.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(
            survey.clone(),
            Entry {
                drawn,
                groups: drawn_groups.clone(),
                used: *clock,
            },
        );
        Ok(drawn_groups)
    }
}
