//! The shared methods of the fleet: instances' purge reports, and releasing a compaction
//! claim.

/// Appends the shared methods of the fleet to `$methods` and hands them on to `$next`,
/// with the rest of the chain `impl_catalog!` started.
macro_rules! fleet_methods {
    ($backend:ty, { $($methods:tt)* }, $next:ident $(, $rest:ident)*) => {
        $crate::shared::$next!($backend, {
            $($methods)*

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
        } $(, $rest)*);
    };
}

pub(crate) use fleet_methods;
