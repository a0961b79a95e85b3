//! The surveys role on SQLite (`crate::Surveys`): the session statistics a log applies (fenced
//! by the instance's epoch), lookups and the reads by reference.

use super::*;

crate::shared::impl_surveys!(SqliteCatalog, {
    async fn apply_session_stats(
        &self,
        instance: &str,
        epoch: i64,
        through_lsn: u64,
        deltas: &[SessionDelta],
    ) -> Result<()> {
        // IMMEDIATE: the transaction reads before it writes; a deferred one would be refused
        // (SQLITE_BUSY, no busy wait) when it upgrades to write while another writer holds the
        // lock, as the corpus recorder's first chunk on 01f3875 showed.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let fenced: Option<bool> =
            sqlx::query_scalar("SELECT fenced_epoch >= $2 FROM instances WHERE instance_id = $1")
                .bind(instance)
                .bind(epoch)
                .fetch_optional(&mut *tx)
                .await?;
        if fenced == Some(true) {
            return Err(Error::Fenced {
                instance: instance.to_owned(),
                epoch,
            });
        }
        // The references the sessions are linked to before the upsert (one may move away) and
        // after it: what a lookup answers of each is refreshed in the same transaction.
        let keys: Vec<(&str, &str)> = deltas
            .iter()
            .map(|delta| (delta.survey_id.as_str(), delta.identifier.as_str()))
            .collect();
        let mut touched = Self::references_of(&mut tx, &keys).await?;
        for chunk in deltas.chunks(MAX_ROWS_PER_STATEMENT / 9) {
            let mut insert = QueryBuilder::new(
                "INSERT INTO sessions
                     (survey_id, identifier, reference, reference_explicit, event_count,
                      first_event_at, last_event_at, first_received_at, last_received_at) ",
            );
            insert.push_values(chunk, |mut row, delta| {
                row.push_bind(delta.survey_id.as_str())
                    .push_bind(&delta.identifier)
                    .push_bind(&delta.reference)
                    .push_bind(delta.reference_explicit)
                    .push_bind(to_i64(delta.event_count))
                    .push_bind(delta.first_event_at)
                    .push_bind(delta.last_event_at)
                    .push_bind(delta.first_received_at)
                    .push_bind(delta.last_received_at);
            });
            insert.push(
                " ON CONFLICT (survey_id, identifier) DO UPDATE SET
                     reference = CASE WHEN excluded.reference_explicit = 1
                                      THEN excluded.reference
                                      ELSE coalesce(sessions.reference, excluded.reference) END,
                     reference_explicit = max(sessions.reference_explicit,
                                              excluded.reference_explicit),
                     event_count = sessions.event_count + excluded.event_count,
                     first_event_at = min(coalesce(sessions.first_event_at, excluded.first_event_at),
                                          excluded.first_event_at),
                     last_event_at = max(coalesce(sessions.last_event_at, excluded.last_event_at),
                                         excluded.last_event_at),
                     first_received_at = min(coalesce(sessions.first_received_at,
                                                      excluded.first_received_at),
                                             excluded.first_received_at),
                     last_received_at = max(coalesce(sessions.last_received_at,
                                                     excluded.last_received_at),
                                            excluded.last_received_at)",
            );
            insert.build().execute(&mut *tx).await?;
        }
        touched.extend(Self::references_of(&mut tx, &keys).await?);
        Self::refresh_summaries(&mut tx, &touched).await?;
        set_watermark(&mut tx, instance, WalConsumer::Stats, through_lsn).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn lookup_sessions(
        &self,
        survey: &SurveyId,
        references: &[String],
    ) -> Result<Vec<SessionSummary>> {
        if references.is_empty() {
            return Ok(Vec::new());
        }
        // One probe of `reference_summaries`' primary key a reference, whatever the survey's
        // size: the row holds the sessions' summed statistics and the latest score (kept by
        // the statistics upserts, the score records and erasure).
        //
        // The rows come back as one JSON array in one row: sqlx hands each result row from its
        // SQLite worker thread to the caller separately, which for 100 rows cost as much as the
        // query itself.
        let mut query = QueryBuilder::new(
            "SELECT json_group_array(json_array(r.reference, r.event_count, r.first_event_at,
                        r.last_event_at, r.human_score_percent, r.score_band, r.scored_at,
                        r.model_version))
             FROM (SELECT DISTINCT value FROM json_each(",
        );
        // DISTINCT: a reference asked for twice is answered once.
        query.push_bind(serde_json_array(references));
        query.push(")) w JOIN reference_summaries r ON r.survey_id = ");
        query.push_bind(survey.as_str());
        query.push(" AND r.reference = w.value");
        let rows: String = query.build_query_scalar().fetch_one(&self.pool).await?;
        type LookupRow = (
            String,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<f64>,
            Option<String>,
            Option<i64>,
            Option<String>,
        );
        let rows: Vec<LookupRow> = serde_json::from_str(&rows)
            .map_err(|error| Error::Corrupt(format!("lookup rows: {error}")))?;
        let mut summaries = Vec::with_capacity(rows.len());
        for (reference, event_count, first, last, percent, band, scored_at, model) in rows {
            let score = match (percent, band, scored_at, model) {
                (Some(human_score_percent), Some(score_band), Some(scored_at), Some(model)) => {
                    Some(SessionScore {
                        human_score_percent,
                        score_band,
                        scored_at,
                        model_version: model,
                    })
                }
                _ => None,
            };
            summaries.push(SessionSummary {
                reference,
                event_count: event_count.unwrap_or(0).max(0) as u64,
                first_event_at: first,
                last_event_at: last,
                score,
            });
        }
        Ok(summaries)
    }

    async fn session_references(
        &self,
        survey: &SurveyId,
        identifiers: &[String],
    ) -> Result<Vec<(String, String)>> {
        if identifiers.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            // CROSS JOIN fixes the wanted identifiers as the outer loop, so each is one
            // primary-key probe. With `IN (SELECT ...)` the planner scanned the survey's
            // sessions instead, a cost that grows with the survey.
            "SELECT s.identifier, s.reference
             FROM json_each($1) AS w CROSS JOIN sessions AS s
             WHERE s.survey_id = $2 AND s.identifier = w.value AND s.reference IS NOT NULL",
        )
        .bind(serde_json_array(identifiers))
        .bind(survey.as_str())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("identifier")?, row.try_get("reference")?)))
            .collect()
    }

    async fn reference_identifiers(
        &self,
        survey: &SurveyId,
        reference: &str,
    ) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT identifier FROM sessions INDEXED BY sessions_by_reference
             WHERE survey_id = $1 AND reference = $2",
        )
        .bind(survey.as_str())
        .bind(reference)
        .fetch_all(&self.pool)
        .await?)
    }
});
