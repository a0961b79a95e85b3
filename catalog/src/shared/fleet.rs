//! The shared methods of the fleet: instances' purge reports, the readiness `ping`, and releasing a
//! compaction claim.

/// `impl Fleet for $backend`: the methods the backend writes its own way, passed in, then
/// the shared ones below.
macro_rules! impl_fleet {
    ($backend:ty, { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Fleet for $backend {
            $($own)*

            async fn ping(&self) -> Result<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
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
        }
    };
}

pub(crate) use impl_fleet;
