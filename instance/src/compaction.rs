//! Compaction as a deployment runs it: the catalog's claims and scoring runs behind the lake's
//! [`CompactionGuard`], one pass on demand (`telltale compact`), and the background pass with
//! the vacuum after it.

use std::sync::Arc;
use std::time::Duration;

use catalog::{Catalog, CompactionClaim, SurveyId};
use lake::operations::compact::{
    self, CompactionConfig, CompactionGuard, CompactionReport, GuardError,
};
use lake::rewrite::{self, RewriteError};
use lake::{Lake, TableKind};

/// How long a compaction claim holds without release. A partition's compaction takes seconds to
/// minutes; one that outlasts the claim can meet a second worker, whose file swap then loses.
const CLAIM_LEASE_MS: i64 = 10 * 60 * 1000;

/// The catalog's side of a compaction: scoring runs that read a survey, and claims on
/// partitions shared by every instance of the catalog. `owner` names this process in them.
pub struct CatalogGuard {
    pub catalog: Arc<dyn Catalog>,
    pub owner: String,
}

fn survey(survey_id: &str) -> Result<SurveyId, GuardError> {
    SurveyId::parse(survey_id).ok_or_else(|| format!("{survey_id:?} is not a survey id").into())
}

#[async_trait::async_trait]
impl CompactionGuard for CatalogGuard {
    async fn survey_is_scanned(&self, survey_id: &str) -> Result<bool, GuardError> {
        Ok(self
            .catalog
            .active_scoring_run(&survey(survey_id)?)
            .await?
            .is_some())
    }

    /// Claims a partition, taking it over from a command-line compaction of this host that died
    /// holding it (a server's claim lapses with its lease, or returns to it when it restarts).
    async fn claim(&self, survey_id: &str, partition: &str) -> Result<bool, GuardError> {
        let id = survey(survey_id)?;
        match self
            .catalog
            .claim_compaction(&id, partition, &self.owner, CLAIM_LEASE_MS)
            .await?
        {
            CompactionClaim::Claimed => Ok(true),
            CompactionClaim::HeldBy(holder) if rewrite::command_line_owner_is_dead(&holder) => {
                self.catalog
                    .release_compaction(&id, partition, &holder)
                    .await?;
                Ok(self
                    .catalog
                    .claim_compaction(&id, partition, &self.owner, CLAIM_LEASE_MS)
                    .await?
                    == CompactionClaim::Claimed)
            }
            CompactionClaim::HeldBy(_) => Ok(false),
        }
    }

    async fn release(&self, survey_id: &str, partition: &str) -> Result<(), GuardError> {
        Ok(self
            .catalog
            .release_compaction(&survey(survey_id)?, partition, &self.owner)
            .await?)
    }
}

/// One compaction pass over `survey` (or every survey) of the deployment's lake.
pub async fn compact(
    catalog: &Arc<dyn Catalog>,
    lake: &Lake,
    owner: &str,
    survey: Option<&SurveyId>,
    config: &CompactionConfig,
) -> Result<CompactionReport, RewriteError> {
    let guard = CatalogGuard {
        catalog: Arc::clone(catalog),
        owner: owner.to_owned(),
    };
    compact::compact(&guard, lake, survey.map(SurveyId::as_str), config).await
}

/// Compacts every survey's events files now and then, and vacuums the tables after (files
/// removed at least `retention` ago, uploads no commit names at least that old), until the
/// task is dropped.
pub fn spawn(
    catalog: Arc<dyn Catalog>,
    lake: Lake,
    owner: String,
    period: Duration,
    config: CompactionConfig,
    retention: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period).await;
            let started = std::time::Instant::now();
            match compact(&catalog, &lake, &owner, None, &config).await {
                Ok(report) if report.files_in > 0 => {
                    tracing::info!(?report, "compacted events files");
                    series::COMPACTION_SECONDS.get().record(started.elapsed());
                    series::COMPACTION_FILES_IN_TOTAL
                        .get()
                        .increment(report.files_in as u64);
                    series::COMPACTION_FILES_OUT_TOTAL
                        .get()
                        .increment(report.files_out as u64);
                    series::COMPACTION_ROWS_TOTAL.get().increment(report.rows);
                    series::COMPACTION_BYTES_IN_TOTAL
                        .get()
                        .increment(report.bytes_in);
                    series::COMPACTION_CONFLICTS_TOTAL
                        .get()
                        .increment(report.conflicts as u64);
                }
                Ok(_) => {}
                Err(error) => {
                    series::COMPACTION_ERRORS_TOTAL.get().increment(1);
                    tracing::warn!(%error, "compaction failed; will retry")
                }
            }
            for kind in TableKind::ALL {
                match lake.table(kind).vacuum(retention).await {
                    Ok(0) => {}
                    Ok(deleted) => {
                        series::VACUUMED_FILES_TOTAL
                            .with(&[("table", kind.as_str())])
                            .increment(deleted as u64);
                        tracing::info!(table = kind.as_str(), deleted, "vacuumed")
                    }
                    Err(error) => {
                        tracing::warn!(table = kind.as_str(), %error, "vacuum failed; will retry")
                    }
                }
            }
        }
    })
}
