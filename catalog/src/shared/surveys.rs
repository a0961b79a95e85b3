//! The shared methods of surveys (provisioning and lookups) and the watermarks of the
//! write-ahead log's consumers, which fold sessions' statistics in.

/// `impl Surveys for $backend`: the methods the backend writes its own way, passed in, then
/// the shared ones below.
macro_rules! impl_surveys {
    ($backend:ty, { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Surveys for $backend {
            $($own)*

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
        }
    };
}

pub(crate) use impl_surveys;
