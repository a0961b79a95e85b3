//! The shared methods of the fleet: joining and fencing instances, their purge reports, the
//! flushes a run asks of them, the readiness `ping`, and releasing a compaction claim. Every
//! time here is the catalog's own clock (`Self::NOW_MS`), never an instance's.

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

            async fn join_fleet(&self, instance: &str) -> Result<i64> {
                let now = Self::NOW_MS;
                let epoch: i64 = sqlx::query_scalar(&format!(
                    "INSERT INTO instances (instance_id, seen_at, purged_through, epoch)
                     VALUES ($1, {now}, 0, 1)
                     ON CONFLICT (instance_id) DO UPDATE SET
                         epoch = CASE WHEN instances.fenced_epoch > instances.epoch
                                      THEN instances.fenced_epoch ELSE instances.epoch END + 1,
                         -- The epoch before ends here: nothing the earlier process of this
                         -- instance still had in flight can land.
                         fenced_epoch = CASE WHEN instances.fenced_epoch > instances.epoch
                                             THEN instances.fenced_epoch ELSE instances.epoch END,
                         seen_at = excluded.seen_at,
                         purge_error = NULL
                     RETURNING epoch"
                ))
                .bind(instance)
                .fetch_one(&self.pool)
                .await?;
                Ok(epoch)
            }

            async fn report_instance(
                &self,
                instance: &str,
                epoch: i64,
                purged_through: i64,
                purge_error: Option<&str>,
            ) -> Result<()> {
                let now = Self::NOW_MS;
                let reported = sqlx::query(&format!(
                    "INSERT INTO instances (instance_id, seen_at, purged_through, epoch, purge_error)
                     VALUES ($1, {now}, $3, $2, $4)
                     ON CONFLICT (instance_id) DO UPDATE SET
                         seen_at = excluded.seen_at,
                         purged_through = CASE WHEN excluded.purged_through > instances.purged_through
                                               THEN excluded.purged_through
                                               ELSE instances.purged_through END,
                         purge_error = excluded.purge_error
                     WHERE instances.fenced_epoch < $2"
                ))
                .bind(instance)
                .bind(epoch)
                .bind(purged_through)
                .bind(purge_error)
                .execute(&self.pool)
                .await?
                .rows_affected();
                if reported == 0 {
                    return Err(Error::Fenced { instance: instance.to_owned(), epoch });
                }
                Ok(())
            }

            async fn leave_fleet(&self, instance: &str, epoch: i64) -> Result<()> {
                sqlx::query(
                    "UPDATE instances SET fenced_epoch = epoch, lake_fenced_epoch = epoch,
                                          left_epoch = epoch
                     WHERE instance_id = $1 AND epoch = $2",
                )
                .bind(instance)
                .bind(epoch)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn check_epoch(&self, instance: &str, epoch: i64) -> Result<()> {
                let fenced: Option<bool> = sqlx::query_scalar(
                    "SELECT fenced_epoch >= $2 FROM instances WHERE instance_id = $1",
                )
                .bind(instance)
                .bind(epoch)
                .fetch_optional(&self.pool)
                .await?;
                if fenced == Some(true) {
                    return Err(Error::Fenced { instance: instance.to_owned(), epoch });
                }
                Ok(())
            }

            async fn fleet_blockers(
                &self,
                survey: &SurveyId,
                reference: &str,
                lease_ms: i64,
            ) -> Result<Vec<FleetMember>> {
                let now = Self::NOW_MS;
                let rows = sqlx::query(&format!(
                    "SELECT instance_id, epoch, seen_at >= {now} - $3 AS live,
                            fenced_epoch >= epoch AS fenced,
                            lake_fenced_epoch >= epoch AS lake_fenced,
                            purge_error, {now} - seen_at AS silent_ms
                     FROM instances
                     WHERE purged_through <
                         (SELECT id FROM tombstones WHERE survey_id = $1 AND reference = $2)
                     ORDER BY instance_id"
                ))
                .bind(survey.as_str())
                .bind(reference)
                .bind(lease_ms)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::fleet_member).collect()
            }

            async fn fence_instance(
                &self,
                instance: &str,
                epoch: i64,
                lease_ms: i64,
            ) -> Result<bool> {
                let now = Self::NOW_MS;
                sqlx::query(&format!(
                    "UPDATE instances SET fenced_epoch = epoch
                     WHERE instance_id = $1 AND epoch = $2 AND seen_at < {now} - $3
                       AND fenced_epoch < epoch"
                ))
                .bind(instance)
                .bind(epoch)
                .bind(lease_ms)
                .execute(&self.pool)
                .await?;
                let fenced: Option<bool> = sqlx::query_scalar(
                    "SELECT fenced_epoch >= $2 FROM instances WHERE instance_id = $1",
                )
                .bind(instance)
                .bind(epoch)
                .fetch_optional(&self.pool)
                .await?;
                Ok(fenced == Some(true))
            }

            async fn mark_lake_fenced(&self, instance: &str, epoch: i64) -> Result<()> {
                sqlx::query(
                    "UPDATE instances SET lake_fenced_epoch = $2
                     WHERE instance_id = $1 AND lake_fenced_epoch < $2",
                )
                .bind(instance)
                .bind(epoch)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn request_fleet_flush(&self, requester: &str, lease_ms: i64) -> Result<FlushRequest> {
                let now = Self::NOW_MS;
                let rows: Vec<(String, i64)> = sqlx::query_as(&format!(
                    "UPDATE instances SET flush_wanted = {now}
                     WHERE instance_id <> $1 AND seen_at >= {now} - $2 AND fenced_epoch < epoch
                     RETURNING instance_id, flush_wanted"
                ))
                .bind(requester)
                .bind(lease_ms)
                .fetch_all(&self.pool)
                .await?;
                let token = rows.iter().map(|(_, token)| *token).max().unwrap_or(0);
                let mut asked: Vec<String> = rows.into_iter().map(|(instance, _)| instance).collect();
                asked.sort();
                Ok(FlushRequest { token, asked })
            }

            async fn fleet_flush_pending(&self, token: i64, lease_ms: i64) -> Result<Vec<String>> {
                let now = Self::NOW_MS;
                Ok(sqlx::query_scalar(&format!(
                    "SELECT instance_id FROM instances
                     WHERE flush_wanted >= $1 AND flushed_for < $1
                       AND seen_at >= {now} - $2 AND fenced_epoch < epoch
                     ORDER BY instance_id"
                ))
                .bind(token)
                .bind(lease_ms)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn flush_wanted(&self, instance: &str) -> Result<(i64, bool)> {
                let row: Option<(i64, bool)> = sqlx::query_as(
                    "SELECT flush_wanted, flushed_for >= flush_wanted FROM instances
                     WHERE instance_id = $1",
                )
                .bind(instance)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.unwrap_or((0, true)))
            }

            async fn flush_answered(&self, instance: &str, epoch: i64, token: i64) -> Result<()> {
                sqlx::query(
                    "UPDATE instances SET flushed_for = $3
                     WHERE instance_id = $1 AND fenced_epoch < $2 AND flushed_for < $3",
                )
                .bind(instance)
                .bind(epoch)
                .bind(token)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn fleet_value(&self, name: &str, candidate: &str) -> Result<String> {
                sqlx::query(
                    "INSERT INTO fleet_values (name, value, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT (name) DO NOTHING",
                )
                .bind(name)
                .bind(candidate)
                .bind(now_millis())
                .execute(&self.pool)
                .await?;
                Ok(sqlx::query_scalar("SELECT value FROM fleet_values WHERE name = $1")
                    .bind(name)
                    .fetch_one(&self.pool)
                    .await?)
            }

            async fn stored_fleet_value(&self, name: &str) -> Result<Option<String>> {
                Ok(sqlx::query_scalar("SELECT value FROM fleet_values WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?)
            }

            async fn replace_fleet_value(&self, name: &str, value: &str) -> Result<()> {
                sqlx::query(
                    "INSERT INTO fleet_values (name, value, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT (name) DO UPDATE SET value = excluded.value,
                                                     created_at = excluded.created_at",
                )
                .bind(name)
                .bind(value)
                .bind(now_millis())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn fleet_members(&self, lease_ms: i64) -> Result<Vec<(FleetMember, bool)>> {
                let now = Self::NOW_MS;
                let rows = sqlx::query(&format!(
                    "SELECT instance_id, epoch, seen_at >= {now} - $1 AS live,
                            fenced_epoch >= epoch AS fenced,
                            lake_fenced_epoch >= epoch AS lake_fenced,
                            purge_error, {now} - seen_at AS silent_ms,
                            left_epoch >= epoch AS left_cleanly
                     FROM instances ORDER BY instance_id"
                ))
                .bind(lease_ms)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| Ok((rows::fleet_member(row)?, row.try_get("left_cleanly")?)))
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
