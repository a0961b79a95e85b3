//! The shared methods of session deletions and tombstones, and the body of
//! `erase_session_rows` both backends run inside their own transaction.

/// `impl Deletions for $backend`: the methods the backend writes its own way, passed in, then
/// the shared ones below.
macro_rules! impl_deletions {
    ($backend:ty, { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Deletions for $backend {
            $($own)*

            async fn redo_deletions(&self) -> Result<u64> {
                let now = now_millis();
                let done = sqlx::query(
                    "UPDATE session_deletions SET
                         status = 'pending', attempts = 0, error = NULL, completed_at = NULL,
                         updated_at = $1, next_attempt_at = $1, owner = NULL, lease_until = NULL,
                         waiting_on = NULL, wait_reason = NULL",
                )
                .bind(now)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
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

            async fn request_session_deletion(
                &self,
                survey: &SurveyId,
                reference: &str,
            ) -> Result<SessionDeletion> {
                let now = now_millis();
                let mut tx = self.pool.begin().await?;
                Self::lock_tombstone_ids(&mut tx).await?;
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
                         owner = NULL, lease_until = NULL, waiting_on = NULL, wait_reason = NULL
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
                let skip_locked = Self::SKIP_LOCKED;
                let claimed = sqlx::query(&format!(
                    "UPDATE session_deletions SET owner = $1, lease_until = $2
                     WHERE (survey_id, reference) IN (
                         SELECT survey_id, reference FROM session_deletions
                         WHERE survey_id = $3 AND reference = $4 AND status = 'pending'
                           AND (owner IS NULL OR owner = $1 OR lease_until < $5)
                         {skip_locked})"
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

            async fn complete_deletion(
                &self,
                survey: &SurveyId,
                reference: &str,
                owner: &str,
            ) -> Result<bool> {
                let completed = sqlx::query(
                    "UPDATE session_deletions SET
                         status = 'completed', attempts = attempts + 1, error = NULL,
                         completed_at = $1, updated_at = $1, owner = NULL, lease_until = NULL,
                         waiting_on = NULL, wait_reason = NULL
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

            async fn tombstone_identifiers(&self, survey: &SurveyId, hashes: &[String]) -> Result<()> {
                let mut tx = self.pool.begin().await?;
                Self::insert_tombstoned_identifiers(&mut tx, survey, hashes, now_millis()).await?;
                tx.commit().await?;
                Ok(())
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
        }
    };
}

pub(crate) use impl_deletions;

/// The body of [`Deletions::erase_session_rows`](crate::Deletions::erase_session_rows) inside the
/// transaction `$tx` (SQLite runs it on a connection with `secure_delete` on): the session's
/// statistics and score go, its identifiers join the tombstone (as hashes), and the runs'
/// lists of sessions they could not score forget it. Uses `$backend`'s `IN_LIST_3` and
/// `bound_list` for the list of identifiers.
macro_rules! erase_session_rows_in {
    ($backend:ty, $tx:ident, $erasure:ident) => {
        let now = now_millis();
        let survey = $erasure.survey_id.as_str();
        let in_list_3 = <$backend>::IN_LIST_3;
        // Other references whose sessions go too (an identifier linked to the session and to
        // another reference): what a lookup answers of them is refreshed below.
        let linked: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT DISTINCT reference FROM sessions WHERE survey_id = $1
               AND (reference = $2 OR identifier {in_list_3}) AND reference IS NOT NULL"
        ))
        .bind(survey)
        .bind(&$erasure.reference)
        .bind(<$backend>::bound_list(&$erasure.identifiers))
        .fetch_all(&mut *$tx)
        .await?;
        sqlx::query(&format!(
            "DELETE FROM sessions WHERE survey_id = $1
               AND (reference = $2 OR identifier {in_list_3})"
        ))
        .bind(survey)
        .bind(&$erasure.reference)
        .bind(<$backend>::bound_list(&$erasure.identifiers))
        .execute(&mut *$tx)
        .await?;
        sqlx::query("DELETE FROM session_scores WHERE survey_id = $1 AND reference = $2")
            .bind(survey)
            .bind(&$erasure.reference)
            .execute(&mut *$tx)
            .await?;
        let others: Vec<(String, String)> = linked
            .into_iter()
            .filter(|reference| *reference != $erasure.reference)
            .map(|reference| (survey.to_owned(), reference))
            .collect();
        <$backend>::refresh_summaries(&mut $tx, &others).await?;
        <$backend>::erase_cohort_points(&mut $tx, survey, &$erasure.reference).await?;
        sqlx::query("DELETE FROM reference_summaries WHERE survey_id = $1 AND reference = $2")
            .bind(survey)
            .bind(&$erasure.reference)
            .execute(&mut *$tx)
            .await?;
        <$backend>::insert_tombstoned_identifiers(
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
