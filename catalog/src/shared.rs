//! What the two catalog backends share: every trait method whose SQL is the same in both
//! dialects is written once here, in [`impl_catalog!`], which each backend invokes with the
//! methods it writes its own way (upserts, row locks, advisory locks, batch inserts and the
//! other places where SQLite and PostgreSQL differ).
//!
//! The shared SQL uses PostgreSQL's numbered placeholders (`$1`, `$2`, ...), which sqlx's SQLite
//! driver binds by number too, and forms both dialects read the same way (`ON CONFLICT ... DO
//! NOTHING`, `RETURNING`, row values). The methods are expanded inside each backend's module, so
//! the names they use resolve there: the helpers (`insert_tombstoned_identifiers`,
//! `lock_tombstone_ids`) and `SKIP_LOCKED`, the clause that makes a claim skip rows another
//! instance is claiming (PostgreSQL's `FOR UPDATE SKIP LOCKED`; nothing in SQLite, which has one
//! writer at a time).
//!
//! rustfmt does not format inside a macro invocation's braces: the backends' own methods, passed
//! in, keep the formatting they are written with.

/// `impl Catalog for $backend` (a struct with a sqlx `pool`): the shared methods below, then
/// the backend's own.
macro_rules! impl_catalog {
    ($backend:ty, { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Catalog for $backend {
            async fn create_organization(&self, name: &str) -> Result<Organization> {
                let organization = Organization {
                    id: OrganizationId::generate(),
                    name: name.to_owned(),
                    created_at: now_millis(),
                };
                sqlx::query("INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3)")
                    .bind(organization.id.as_str())
                    .bind(&organization.name)
                    .bind(organization.created_at)
                    .execute(&self.pool)
                    .await?;
                Ok(organization)
            }

            async fn delete_organization(&self, id: &OrganizationId) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE organizations SET deleted_at = $1 WHERE id = $2 AND deleted_at IS NULL",
                )
                .bind(now_millis())
                .bind(id.as_str())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn count_organizations(&self) -> Result<u64> {
                let count: i64 = sqlx::query_scalar("SELECT count(*) FROM organizations")
                    .fetch_one(&self.pool)
                    .await?;
                Ok(count.max(0) as u64)
            }

            async fn ping(&self) -> Result<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn list_organizations(&self) -> Result<Vec<Organization>> {
                let rows = sqlx::query(
                    "SELECT id, name, created_at FROM organizations WHERE deleted_at IS NULL
                     ORDER BY created_at, id",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::organization).collect()
            }

            async fn create_key(
                &self,
                organization: &OrganizationId,
                label: &str,
                scopes: &[Scope],
            ) -> Result<CreatedKey> {
                let secret = IntegrationKeySecret::generate();
                let info = KeyInfo {
                    prefix: secret.prefix().clone(),
                    organization_id: organization.clone(),
                    label: label.to_owned(),
                    scopes: scopes.to_vec(),
                    created_at: now_millis(),
                    revoked_at: None,
                };
                // One statement: the organization cannot be deleted between the check and the insert.
                let inserted = sqlx::query(
                    "INSERT INTO integration_keys
                         (prefix, organization_id, secret_sha256, label, scopes, created_at)
                     SELECT $1, id, $2, $3, $4, $5 FROM organizations
                     WHERE id = $6 AND deleted_at IS NULL",
                )
                .bind(info.prefix.as_str())
                .bind(secret.sha256_hex())
                .bind(&info.label)
                .bind(Scope::join(&info.scopes))
                .bind(info.created_at)
                .bind(organization.as_str())
                .execute(&self.pool)
                .await?;
                if inserted.rows_affected() == 0 {
                    return Err(Error::OrganizationNotFound(organization.to_string()));
                }
                Ok(CreatedKey { secret, info })
            }

            async fn list_keys(&self, organization: &OrganizationId) -> Result<Vec<KeyInfo>> {
                let rows = sqlx::query(
                    "SELECT prefix, organization_id, label, scopes, created_at, revoked_at
                     FROM integration_keys WHERE organization_id = $1 ORDER BY created_at, prefix",
                )
                .bind(organization.as_str())
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::key_info).collect()
            }

            async fn revoke_key(&self, prefix: &KeyPrefix) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE integration_keys SET revoked_at = $1 WHERE prefix = $2 AND revoked_at IS NULL",
                )
                .bind(now_millis())
                .bind(prefix.as_str())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn authenticate(
                &self,
                secret: &IntegrationKeySecret,
            ) -> Result<Option<AuthenticatedKey>> {
                let row = sqlx::query(
                    "SELECT k.prefix, k.organization_id, k.label, k.scopes, k.created_at, k.revoked_at,
                            k.secret_sha256, o.name AS organization_name, o.deleted_at
                     FROM integration_keys k JOIN organizations o ON o.id = k.organization_id
                     WHERE k.prefix = $1",
                )
                .bind(secret.prefix().as_str())
                .fetch_optional(&self.pool)
                .await?;
                match row {
                    Some(row) => rows::authenticated_key(&row, &secret.sha256_hex()),
                    None => Ok(None),
                }
            }

            async fn survey(&self, organization: &OrganizationId, id: &SurveyId) -> Result<Option<Survey>> {
                let row = sqlx::query(&format!(
                    "SELECT {SURVEY_COLUMNS} FROM surveys WHERE id = $1 AND organization_id = $2"
                ))
                .bind(id.as_str())
                .bind(organization.as_str())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(rows::survey).transpose()
            }

            async fn survey_by_id(&self, id: &SurveyId) -> Result<Option<Survey>> {
                let row = sqlx::query(&format!(
                    "SELECT {SURVEY_COLUMNS} FROM surveys WHERE id = $1"
                ))
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(rows::survey).transpose()
            }

            async fn survey_by_tracking_key(&self, tracking_key: &TrackingKey) -> Result<Option<SurveyId>> {
                let id: Option<String> =
                    sqlx::query_scalar("SELECT id FROM surveys WHERE tracking_key = $1")
                        .bind(tracking_key.as_str())
                        .fetch_optional(&self.pool)
                        .await?;
                Ok(id.map(SurveyId::from_stored))
            }

            async fn wal_watermark(&self, instance: &str, consumer: WalConsumer) -> Result<u64> {
                let lsn: Option<i64> = sqlx::query_scalar(
                    "SELECT lsn FROM wal_watermarks WHERE instance_id = $1 AND consumer = $2",
                )
                .bind(instance)
                .bind(consumer.as_str())
                .fetch_optional(&self.pool)
                .await?;
                Ok(lsn.unwrap_or(0).max(0) as u64)
            }

            async fn tombstones_after(&self, after: i64) -> Result<Vec<Tombstone>> {
                let rows = sqlx::query(
                    "SELECT id, survey_id, reference, created_at FROM tombstones WHERE id > $1 ORDER BY id",
                )
                .bind(after)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::tombstone).collect()
            }

            async fn scoring_run(&self, survey: &SurveyId, id: &RunId) -> Result<Option<ScoringRun>> {
                Ok(self
                    .run_by_id(id)
                    .await?
                    .filter(|run| &run.survey_id == survey))
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
                                             failures = $5, updated_at = $6, lease_until = $7
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
                .fetch_optional(&self.pool)
                .await?;
                Ok(match cancel_requested {
                    None => RunControl::LeaseLost,
                    Some(Some(_)) => RunControl::CancelRequested,
                    Some(None) => RunControl::Continue,
                })
            }

            async fn survey_sessions(&self, survey: &SurveyId) -> Result<Vec<SessionIdentity>> {
                let rows = sqlx::query(
                    "SELECT identifier, reference, event_count FROM sessions s
                     WHERE survey_id = $1
                       AND NOT EXISTS (SELECT 1 FROM tombstones t
                                       WHERE t.survey_id = s.survey_id AND t.reference = s.reference)",
                )
                .bind(survey.as_str())
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::session_identity).collect()
            }

            async fn scored_references(&self, survey: &SurveyId) -> Result<Vec<ScoredReference>> {
                let rows = sqlx::query("SELECT reference, run_id FROM session_scores WHERE survey_id = $1")
                    .bind(survey.as_str())
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(rows::scored_reference).collect()
            }

            async fn session_deletion(
                &self,
                survey: &SurveyId,
                reference: &str,
            ) -> Result<Option<SessionDeletion>> {
                let row = sqlx::query(&format!(
                    "SELECT {DELETION_COLUMNS} FROM session_deletions
                     WHERE survey_id = $1 AND reference = $2"
                ))
                .bind(survey.as_str())
                .bind(reference)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(rows::deletion).transpose()
            }

            async fn tombstone_identifiers(&self, survey: &SurveyId, hashes: &[String]) -> Result<()> {
                let mut tx = self.pool.begin().await?;
                insert_tombstoned_identifiers(&mut tx, survey, hashes, now_millis()).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn instances_yet_to_purge(
                &self,
                survey: &SurveyId,
                reference: &str,
                seen_since: i64,
            ) -> Result<Vec<String>> {
                let rows = sqlx::query(
                    "SELECT instance_id FROM instances
                     WHERE seen_at >= $1 AND purged_through <
                         (SELECT id FROM tombstones WHERE survey_id = $2 AND reference = $3)
                     ORDER BY instance_id",
                )
                .bind(seen_since)
                .bind(survey.as_str())
                .bind(reference)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| Ok(row.try_get::<String, _>(0)?))
                    .collect()
            }

            async fn tombstoned_identifiers_after(&self, after: i64) -> Result<Vec<TombstonedIdentifier>> {
                let rows = sqlx::query(
                    "SELECT id, survey_id, identifier_sha256 FROM tombstoned_identifiers
                     WHERE id > $1 ORDER BY id",
                )
                .bind(after)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::tombstoned_identifier).collect()
            }

            async fn release_compaction(
                &self,
                survey: &SurveyId,
                partition: &str,
                owner: &str,
            ) -> Result<()> {
                sqlx::query(
                    "UPDATE compaction_claims SET owner = NULL, lease_until = 0
                     WHERE survey_id = $1 AND partition_date = $2 AND owner = $3",
                )
                .bind(survey.as_str())
                .bind(partition)
                .bind(owner)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn provision_survey(
                &self,
                organization: &OrganizationId,
                external_survey_id: &str,
                name: &str,
            ) -> Result<Survey> {
                let now = now_millis();
                // One statement: concurrent provisioning of the same external id cannot create two.
                let row = sqlx::query(&format!(
                    "INSERT INTO surveys
                         (id, organization_id, external_survey_id, name, tracking_key, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $6)
                     ON CONFLICT (organization_id, external_survey_id)
                     DO UPDATE SET name = excluded.name, updated_at = excluded.updated_at
                     RETURNING {SURVEY_COLUMNS}"
                ))
                .bind(SurveyId::generate().as_str())
                .bind(organization.as_str())
                .bind(external_survey_id)
                .bind(name)
                .bind(TrackingKey::generate().as_str())
                .bind(now)
                .fetch_one(&self.pool)
                .await?;
                rows::survey(&row)
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

            async fn complete_deletion(
                &self,
                survey: &SurveyId,
                reference: &str,
                owner: &str,
            ) -> Result<bool> {
                let completed = sqlx::query(
                    "UPDATE session_deletions SET
                         status = 'completed', attempts = attempts + 1, error = NULL,
                         completed_at = $1, updated_at = $1, owner = NULL, lease_until = NULL
                     WHERE survey_id = $2 AND reference = $3 AND status = 'pending' AND owner = $4",
                )
                .bind(now_millis())
                .bind(survey.as_str())
                .bind(reference)
                .bind(owner)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(completed == 1)
            }

            async fn claimable_deletions(&self, owner: &str, now: i64) -> Result<Vec<SessionDeletion>> {
                let rows = sqlx::query(&format!(
                    "SELECT {DELETION_COLUMNS} FROM session_deletions
                     WHERE status = 'pending' AND next_attempt_at <= $1
                       AND (owner IS NULL OR owner = $2 OR lease_until < $1)
                     ORDER BY requested_at"
                ))
                .bind(now)
                .bind(owner)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::deletion).collect()
            }

            async fn has_active_scoring_run(&self, survey: &SurveyId) -> Result<bool> {
                let active: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM scoring_runs WHERE survey_id = $1 AND status = 'running')",
                )
                .bind(survey.as_str())
                .fetch_one(&self.pool)
                .await?;
                Ok(active)
            }

            async fn report_instance(&self, instance: &str, now: i64, purged_through: i64) -> Result<()> {
                sqlx::query(
                    "INSERT INTO instances (instance_id, seen_at, purged_through) VALUES ($1, $2, $3)
                     ON CONFLICT (instance_id) DO UPDATE SET
                         seen_at = excluded.seen_at,
                         purged_through = CASE WHEN excluded.purged_through > instances.purged_through
                                               THEN excluded.purged_through
                                               ELSE instances.purged_through END",
                )
                .bind(instance)
                .bind(now)
                .bind(purged_through)
                .execute(&self.pool)
                .await?;
                Ok(())
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
                                             owner = NULL, lease_until = NULL
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
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(finished == 1)
            }

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

            async fn request_session_deletion(
                &self,
                survey: &SurveyId,
                reference: &str,
            ) -> Result<SessionDeletion> {
                let now = now_millis();
                let mut tx = self.pool.begin().await?;
                lock_tombstone_ids(&mut tx).await?;
                sqlx::query(
                    "INSERT INTO tombstones (survey_id, reference, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT (survey_id, reference) DO NOTHING",
                )
                .bind(survey.as_str())
                .bind(reference)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO session_deletions
                         (survey_id, reference, status, attempts, requested_at, updated_at, next_attempt_at)
                     VALUES ($1, $2, 'pending', 0, $3, $3, $3)
                     ON CONFLICT (survey_id, reference) DO UPDATE SET
                         status = 'pending', attempts = 0, error = NULL, completed_at = NULL,
                         updated_at = excluded.updated_at, next_attempt_at = excluded.next_attempt_at,
                         owner = NULL, lease_until = NULL
                     WHERE session_deletions.status = 'failed'",
                )
                .bind(survey.as_str())
                .bind(reference)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let row = sqlx::query(&format!(
                    "SELECT {DELETION_COLUMNS} FROM session_deletions
                     WHERE survey_id = $1 AND reference = $2"
                ))
                .bind(survey.as_str())
                .bind(reference)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                rows::deletion(&row)
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
                let row = sqlx::query(&format!(
                    "UPDATE scoring_runs SET owner = $1, lease_until = $2
                     WHERE id = (SELECT id FROM scoring_runs
                                 WHERE id = $3 AND status = 'running'
                                   AND (owner IS NULL OR owner = $1 OR lease_until IS NULL
                                        OR lease_until < $4)
                                 {SKIP_LOCKED})
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

            async fn claim_deletion(
                &self,
                survey: &SurveyId,
                reference: &str,
                owner: &str,
                lease_ms: i64,
            ) -> Result<bool> {
                let now = now_millis();
                // SKIP LOCKED (PostgreSQL): a deletion another instance is claiming right now is simply
                // not ours.
                let claimed = sqlx::query(&format!(
                    "UPDATE session_deletions SET owner = $1, lease_until = $2
                     WHERE (survey_id, reference) IN (
                         SELECT survey_id, reference FROM session_deletions
                         WHERE survey_id = $3 AND reference = $4 AND status = 'pending'
                           AND (owner IS NULL OR owner = $1 OR lease_until < $5)
                         {SKIP_LOCKED})"
                ))
                .bind(owner)
                .bind(now.saturating_add(lease_ms))
                .bind(survey.as_str())
                .bind(reference)
                .bind(now)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(claimed == 1)
            }

            $($own)*
        }
    };
}

pub(crate) use impl_catalog;

/// The body of [`Catalog::erase_session_rows`](crate::Catalog::erase_session_rows) inside the
/// transaction `$tx` (SQLite runs it on a connection with `secure_delete` on): the session's
/// statistics and score go, its identifiers join the tombstone (as hashes), and the runs'
/// lists of sessions they could not score forget it. Uses the backend's `IN_LIST_3` and
/// `bound_list` for the list of identifiers.
macro_rules! erase_session_rows_in {
    ($tx:ident, $erasure:ident) => {
        let now = now_millis();
        let survey = $erasure.survey_id.as_str();
        sqlx::query(&format!(
            "DELETE FROM sessions WHERE survey_id = $1
               AND (reference = $2 OR identifier {IN_LIST_3})"
        ))
        .bind(survey)
        .bind(&$erasure.reference)
        .bind(bound_list(&$erasure.identifiers))
        .execute(&mut *$tx)
        .await?;
        sqlx::query("DELETE FROM session_scores WHERE survey_id = $1 AND reference = $2")
            .bind(survey)
            .bind(&$erasure.reference)
            .execute(&mut *$tx)
            .await?;
        insert_tombstoned_identifiers(
            &mut $tx,
            &$erasure.survey_id,
            &$erasure.identifier_hashes,
            now,
        )
        .await?;
        // A run's list of sessions it could not score names them by reference.
        let runs = sqlx::query(
            "SELECT id, failures FROM scoring_runs WHERE survey_id = $1 AND failures <> '[]'",
        )
        .bind(survey)
        .fetch_all(&mut *$tx)
        .await?;
        for run in runs {
            let (id, failures): (String, String) = (run.try_get(0)?, run.try_get(1)?);
            if let Some(kept) = rows::failures_without(&failures, $erasure)? {
                sqlx::query("UPDATE scoring_runs SET failures = $1 WHERE id = $2")
                    .bind(kept)
                    .bind(id)
                    .execute(&mut *$tx)
                    .await?;
            }
        }
    };
}

pub(crate) use erase_session_rows_in;
