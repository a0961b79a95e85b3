//! The deletions role on PostgreSQL (`crate::Deletions`): erasure requests, their progress and
//! the tombstones they leave.

use super::*;

crate::shared::impl_deletions!(PgCatalog, {
    async fn set_back_deletion(
        &self,
        survey: &SurveyId,
        reference: &str,
        owner: &str,
        setback: &DeletionSetback,
    ) -> Result<Option<SessionDeletion>> {
        let row = match setback {
            DeletionSetback::Failed {
                error,
                retry_at,
                max_attempts,
            } => {
                sqlx::query(&format!(
                    "UPDATE session_deletions SET
                         attempts = attempts + 1,
                         status = CASE WHEN attempts + 1 >= $1 THEN 'failed' ELSE 'pending' END,
                         error = $2, next_attempt_at = $3, updated_at = $4,
                         owner = NULL, lease_until = NULL, waiting_on = NULL, wait_reason = NULL
                     WHERE survey_id = $5 AND reference = $6 AND status = 'pending'
                       AND owner = $7
                     RETURNING {DELETION_COLUMNS}"
                ))
                .bind(i64::from(*max_attempts))
                .bind(error)
                .bind(retry_at)
                .bind(now_millis())
                .bind(survey.as_str())
                .bind(reference)
                .bind(owner)
                .fetch_optional(&self.pool)
                .await?
            }
            DeletionSetback::Deferred {
                retry_at,
                waiting_on,
                reason,
            } => {
                sqlx::query(&format!(
                    "UPDATE session_deletions SET
                         next_attempt_at = $1, owner = NULL, lease_until = NULL,
                         waiting_on = $5, wait_reason = $6
                     WHERE survey_id = $2 AND reference = $3 AND status = 'pending'
                       AND owner = $4
                     RETURNING {DELETION_COLUMNS}"
                ))
                .bind(retry_at)
                .bind(survey.as_str())
                .bind(reference)
                .bind(owner)
                .bind(waiting_on.as_deref())
                .bind(reason)
                .fetch_optional(&self.pool)
                .await?
            }
        };
        row.as_ref().map(rows::deletion).transpose()
    }

    async fn erase_session_rows(&self, erasure: &SessionErasure) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        crate::shared::erase_session_rows_in!(PgCatalog, tx, erasure);
        tx.commit().await?;
        Ok(())
    }
});
