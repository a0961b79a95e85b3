//! The shared methods of scoring runs: starting, claiming, renewing and finishing them, and
//! what a run reads to plan (a survey's sessions, the references already scored).

/// `impl Runs for $backend`: the methods the backend writes its own way, passed in, then
/// the shared ones below.
macro_rules! impl_runs {
    ($backend:ty, { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Runs for $backend {
            $($own)*

            async fn start_scoring_run(
                &self,
                survey: &SurveyId,
                force: bool,
            ) -> Result<(ScoringRun, bool)> {
                // The partial unique index admits one `running` row per survey; a concurrent insert
                // waits for the first to commit and then inserts nothing. The loser returns the
                // winner; if that run ended in between, it tries again.
                for _ in 0..10 {
                    let id = RunId::generate();
                    let now = now_millis();
                    let inserted = sqlx::query(&format!(
                        "INSERT INTO scoring_runs
                             (id, survey_id, force, status, created_at, started_at, updated_at)
                         VALUES ($1, $2, $3, 'running', $4, $4, $4)
                         ON CONFLICT DO NOTHING
                         RETURNING {RUN_COLUMNS}"
                    ))
                    .bind(id.as_str())
                    .bind(survey.as_str())
                    .bind(force)
                    .bind(now)
                    .fetch_optional(&self.pool)
                    .await?;
                    if let Some(row) = inserted {
                        return Ok((rows::scoring_run(&row)?, true));
                    }
                    let active = sqlx::query(&format!(
                        "SELECT {RUN_COLUMNS} FROM scoring_runs
                         WHERE survey_id = $1 AND status = 'running'"
                    ))
                    .bind(survey.as_str())
                    .fetch_optional(&self.pool)
                    .await?;
                    if let Some(row) = active {
                        return Ok((rows::scoring_run(&row)?, false));
                    }
                }
                Err(Error::Corrupt(
                    "could not start a run: the active run kept changing".to_owned(),
                ))
            }

            async fn scoring_run(&self, survey: &SurveyId, id: &RunId) -> Result<Option<ScoringRun>> {
                let row = sqlx::query(&format!(
                    "SELECT {RUN_COLUMNS} FROM scoring_runs WHERE id = $1 AND survey_id = $2"
                ))
                .bind(id.as_str())
                .bind(survey.as_str())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(rows::scoring_run).transpose()
            }

            async fn request_run_cancel(
                &self,
                survey: &SurveyId,
                id: &RunId,
                requested_by: &str,
            ) -> Result<Option<ScoringRun>> {
                sqlx::query(
                    "UPDATE scoring_runs SET cancel_requested_at = $1, cancel_requested_by = $2,
                                             updated_at = $1
                     WHERE id = $3 AND survey_id = $4 AND status = 'running'
                       AND cancel_requested_at IS NULL",
                )
                .bind(now_millis())
                .bind(requested_by)
                .bind(id.as_str())
                .bind(survey.as_str())
                .execute(&self.pool)
                .await?;
                self.scoring_run(survey, id).await
            }

            async fn claimable_scoring_runs(&self, owner: &str) -> Result<Vec<ScoringRun>> {
                let rows = sqlx::query(&format!(
                    "SELECT {RUN_COLUMNS} FROM scoring_runs
                     WHERE status = 'running'
                       AND (owner IS NULL OR owner = $1 OR lease_until IS NULL OR lease_until < $2)
                     ORDER BY created_at"
                ))
                .bind(owner)
                .bind(now_millis())
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::scoring_run).collect()
            }

            async fn claim_scoring_run(
                &self,
                id: &RunId,
                owner: &str,
                lease_ms: i64,
            ) -> Result<Option<ScoringRun>> {
                let now = now_millis();
                // SKIP LOCKED (PostgreSQL): when another instance is claiming (or fencing on) the run right now,
                // this one moves on instead of waiting to find it taken.
                let skip_locked = Self::SKIP_LOCKED;
                let row = sqlx::query(&format!(
                    "UPDATE scoring_runs SET owner = $1, lease_until = $2
                     WHERE id = (SELECT id FROM scoring_runs
                                 WHERE id = $3 AND status = 'running'
                                   AND (owner IS NULL OR owner = $1 OR lease_until IS NULL
                                        OR lease_until < $4)
                                 {skip_locked})
                     RETURNING {RUN_COLUMNS}"
                ))
                .bind(owner)
                .bind(now.saturating_add(lease_ms))
                .bind(id.as_str())
                .bind(now)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(rows::scoring_run).transpose()
            }

            async fn report_run_progress(
                &self,
                id: &RunId,
                owner: &str,
                lease_ms: i64,
                progress: &RunProgress,
            ) -> Result<RunControl> {
                let now = now_millis();
                let cancel_requested: Option<Option<i64>> = sqlx::query_scalar(
                    "UPDATE scoring_runs SET total = $1, scored = $2, skipped = $3, failed = $4,
                                             failures = $5, updated_at = $6, lease_until = $7,
                                             deferred = $10, deferred_reason = $11
                     WHERE id = $8 AND owner = $9 AND status = 'running'
                     RETURNING cancel_requested_at",
                )
                .bind(to_i64(progress.total))
                .bind(to_i64(progress.scored))
                .bind(to_i64(progress.skipped))
                .bind(to_i64(progress.failed))
                .bind(rows::failures_json(&progress.failures)?)
                .bind(now)
                .bind(now.saturating_add(lease_ms))
                .bind(id.as_str())
                .bind(owner)
                .bind(to_i64(progress.deferred))
                .bind(progress.deferred_reason.as_deref())
                .fetch_optional(&self.pool)
                .await?;
                Ok(match cancel_requested {
                    None => RunControl::LeaseLost,
                    Some(Some(_)) => RunControl::CancelRequested,
                    Some(None) => RunControl::Continue,
                })
            }

            async fn finish_scoring_run(
                &self,
                id: &RunId,
                owner: &str,
                progress: &RunProgress,
                outcome: &RunOutcome,
            ) -> Result<bool> {
                let (status, error) = match outcome {
                    RunOutcome::Completed => (RunStatus::Completed, None),
                    RunOutcome::Failed { error } => (RunStatus::Failed, Some(error.as_str())),
                    RunOutcome::Canceled => (RunStatus::Canceled, None),
                };
                let finished = sqlx::query(
                    "UPDATE scoring_runs SET status = $1, total = $2, scored = $3, skipped = $4,
                                             failed = $5, failures = $6, error = $7, updated_at = $8,
                                             completed_at = CASE WHEN $9 THEN NULL ELSE $8 END,
                                             canceled_at = CASE WHEN $9 THEN $8 ELSE NULL END,
                                             canceled_by = CASE WHEN $9 THEN cancel_requested_by
                                                                ELSE NULL END,
                                             owner = NULL, lease_until = NULL,
                                             deferred = $12, deferred_reason = $13
                     WHERE id = $10 AND owner = $11 AND status = 'running'",
                )
                .bind(status.as_str())
                .bind(to_i64(progress.total))
                .bind(to_i64(progress.scored))
                .bind(to_i64(progress.skipped))
                .bind(to_i64(progress.failed))
                .bind(rows::failures_json(&progress.failures)?)
                .bind(error)
                .bind(now_millis())
                .bind(matches!(outcome, RunOutcome::Canceled))
                .bind(id.as_str())
                .bind(owner)
                .bind(to_i64(progress.deferred))
                .bind(progress.deferred_reason.as_deref())
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(finished == 1)
            }

            async fn survey_sessions(&self, survey: &SurveyId) -> Result<Vec<SessionIdentity>> {
                // A read of the whole survey: the bulk statements' time bound.
                let mut tx = self.pool.begin().await?;
                <$backend>::allow_bulk_statements(&mut tx).await?;
                let rows = sqlx::query(
                    "SELECT identifier, reference, event_count, first_received_at, last_received_at
                     FROM sessions s
                     WHERE survey_id = $1
                       AND NOT EXISTS (SELECT 1 FROM tombstones t
                                       WHERE t.survey_id = s.survey_id AND t.reference = s.reference)",
                )
                .bind(survey.as_str())
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                rows.iter().map(rows::session_identity).collect()
            }

            async fn scored_references(&self, survey: &SurveyId) -> Result<Vec<ScoredReference>> {
                let mut tx = self.pool.begin().await?;
                <$backend>::allow_bulk_statements(&mut tx).await?;
                let rows = sqlx::query("SELECT reference, run_id FROM session_scores WHERE survey_id = $1")
                    .bind(survey.as_str())
                    .fetch_all(&mut *tx)
                    .await?;
                tx.commit().await?;
                rows.iter().map(rows::scored_reference).collect()
            }

            async fn unscored_sessions(
                &self,
                survey: &SurveyId,
                run: &RunId,
            ) -> Result<UnscoredSessions> {
                // Counts: one pass over the index `reference_summaries_live` alone (one entry a
                // reference with sessions); tombstoned references that got sessions again after
                // their erasure are few and subtracted.
                let live = <$backend>::LIVE_REFERENCES;
                let due = <$backend>::DUE_REFERENCES;
                let tombstoned_live = <$backend>::TOMBSTONED_LIVE;
                let scored_by_run = <$backend>::SCORED_BY_RUN;
                let sessions_of = <$backend>::SESSIONS_OF_REFERENCE;
                // A survey's first run reads every session: the bulk statements' time bound,
                // and the counts and the rows from one snapshot.
                let mut tx = self.pool.begin().await?;
                <$backend>::allow_bulk_statements(&mut tx).await?;
                let (references, scored, tombstoned, tombstoned_scored, scored_by_run): (
                    i64,
                    i64,
                    i64,
                    i64,
                    i64,
                ) = sqlx::query_as(&format!(
                    "SELECT live.n, live.scored,
                        (SELECT count(*) FROM {tombstoned_live}),
                        (SELECT count(r.scored_at) FROM {tombstoned_live}),
                        (SELECT count(*) FROM {scored_by_run}
                            AND NOT EXISTS (SELECT 1 FROM tombstones t
                                            WHERE t.survey_id = c.survey_id
                                              AND t.reference = c.reference))
                     FROM (SELECT count(*) AS n, count(scored_at) AS scored
                           FROM reference_summaries {live}
                           WHERE survey_id = $1 AND sessions > 0) live"
                ))
                .bind(survey.as_str())
                .bind(run.as_str())
                .fetch_one(&mut *tx)
                .await?;
                // The references due: no score, or acknowledged events that grew past the ones
                // their score was computed from (the partial index `reference_summaries_due`).
                let rows = sqlx::query(&format!(
                    "SELECT s.identifier, s.reference, s.event_count, s.first_received_at,
                            s.last_received_at, r.scored_at IS NOT NULL AS grown
                     FROM reference_summaries r {due} {sessions_of}
                     WHERE r.survey_id = $1
                       AND r.sessions > 0
                       AND (r.scored_at IS NULL OR r.event_count > r.scored_events)
                       AND NOT EXISTS (SELECT 1 FROM tombstones t
                                       WHERE t.survey_id = r.survey_id AND t.reference = r.reference)"
                ))
                .bind(survey.as_str())
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                let count = |n: i64| u64::try_from(n).unwrap_or(0);
                let (mut sessions, mut grown) = (Vec::new(), Vec::new());
                for row in &rows {
                    let identity = rows::session_identity(row)?;
                    if row.try_get::<bool, _>("grown")? {
                        grown.push(identity);
                    } else {
                        sessions.push(identity);
                    }
                }
                Ok(UnscoredSessions {
                    references: count(references - tombstoned),
                    scored: count(scored - tombstoned_scored),
                    scored_by_run: count(scored_by_run),
                    sessions,
                    grown,
                })
            }

            async fn reference_sessions(
                &self,
                survey: &SurveyId,
                references: &[String],
            ) -> Result<Vec<SessionIdentity>> {
                if references.is_empty() {
                    return Ok(Vec::new());
                }
                let in_list_2 = <$backend>::IN_LIST_2;
                let by_reference = <$backend>::SESSIONS_BY_REFERENCE;
                let rows = sqlx::query(&format!(
                    "SELECT identifier, reference, event_count, first_received_at, last_received_at
                     FROM sessions s {by_reference}
                     WHERE survey_id = $1 AND reference {in_list_2}
                       AND NOT EXISTS (SELECT 1 FROM tombstones t
                                       WHERE t.survey_id = s.survey_id AND t.reference = s.reference)"
                ))
                .bind(survey.as_str())
                .bind(<$backend>::bound_list(references))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::session_identity).collect()
            }

            async fn run_references(&self, survey: &SurveyId, run: &RunId) -> Result<Vec<String>> {
                Ok(sqlx::query_scalar(
                    "SELECT reference FROM session_scores WHERE survey_id = $1 AND run_id = $2",
                )
                .bind(survey.as_str())
                .bind(run.as_str())
                .fetch_all(&self.pool)
                .await?)
            }

            async fn cohort_bins(&self, survey: &SurveyId) -> Result<Vec<CohortBin>> {
                let rows: Vec<(i64, i64, i64, i64, i64)> = sqlx::query_as(
                    "SELECT modality, mask, axis, bin, sessions FROM cohort_bins
                     WHERE survey_id = $1 AND sessions > 0",
                )
                .bind(survey.as_str())
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter()
                    .map(|(modality, mask, axis, bin, sessions)| {
                        let corrupt = || Error::Corrupt(format!("cohort bin {modality}/{mask}/{axis}/{bin}"));
                        Ok(CohortBin {
                            modality: u8::try_from(modality).map_err(|_| corrupt())?,
                            mask: u32::try_from(mask).map_err(|_| corrupt())?,
                            axis: u8::try_from(axis).map_err(|_| corrupt())?,
                            bin: u16::try_from(bin).map_err(|_| corrupt())?,
                            sessions,
                        })
                    })
                    .collect()
            }

            async fn probe_cohort(
                &self,
                survey: &SurveyId,
                probes: &[CohortProbe],
            ) -> Result<Vec<StoredCohortPoint>> {
                self.find_cohort_points(survey.as_str(), probes).await
            }

            async fn active_scoring_run(&self, survey: &SurveyId) -> Result<Option<RunId>> {
                let active: Option<String> = sqlx::query_scalar(
                    "SELECT id FROM scoring_runs WHERE survey_id = $1 AND status = 'running'",
                )
                .bind(survey.as_str())
                .fetch_optional(&self.pool)
                .await?;
                Ok(active.map(RunId::from_stored))
            }

            async fn note_run_pause(&self, id: &RunId, owner: &str) -> Result<Option<u32>> {
                let pauses: Option<i64> = sqlx::query_scalar(
                    "UPDATE scoring_runs SET pauses = pauses + 1
                     WHERE id = $1 AND owner = $2 AND status = 'running'
                     RETURNING pauses",
                )
                .bind(id.as_str())
                .bind(owner)
                .fetch_optional(&self.pool)
                .await?;
                Ok(pauses.map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
            }
        }
    };
}

pub(crate) use impl_runs;
