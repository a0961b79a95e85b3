//! The surveys role on PostgreSQL (`crate::Surveys`): the session statistics a log applies
//! (one statement whatever the batch size, fenced by the instance's epoch), lookups and the
//! reads by reference.

use std::sync::atomic::Ordering;

use super::*;

/// New sessions after which a handle has PostgreSQL's statistics of the sessions' tables taken
/// again (`ANALYZE`), rather than wait for autovacuum's: planned on statistics from before a
/// survey of thousands of sessions arrived, the statistics upsert read the survey's sessions
/// once per reference (`sessions_pkey` with a filter on the reference: a 2,000-session batch
/// into a survey of 18,000 took 4.8-6.5 s, past the statement timeout; the conformance test
/// `a_plan_read_stays_linear_on_statistics_from_before_the_survey_grew`).
const ANALYZE_AFTER_NEW_SESSIONS: u64 = 4_000;

async fn set_watermark(
    tx: &mut Tx<'_>,
    instance: &str,
    consumer: WalConsumer,
    lsn: u64,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO wal_watermarks (instance_id, consumer, lsn) VALUES ($1, $2, $3)
         ON CONFLICT (instance_id, consumer)
         DO UPDATE SET lsn = GREATEST(wal_watermarks.lsn, excluded.lsn)",
    )
    .bind(instance)
    .bind(consumer.as_str())
    .bind(to_i64(lsn))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Sums deltas of the same identifier (one `INSERT ... ON CONFLICT DO UPDATE` may not touch a
/// row twice in PostgreSQL), in (survey, identifier) order: two instances applying overlapping
/// batches then lock the rows they share in the same order, where arrival order deadlocked them
/// (a 30-minute fleet soak logged a `deadlock detected` retry).
pub(super) fn merge_deltas(deltas: &[SessionDelta]) -> Vec<SessionDelta> {
    let mut merged: Vec<SessionDelta> = Vec::with_capacity(deltas.len());
    let mut index: HashMap<(&str, &str), usize> = HashMap::with_capacity(deltas.len());
    for delta in deltas {
        let key = (delta.survey_id.as_str(), delta.identifier.as_str());
        match index.get(&key) {
            None => {
                index.insert(key, merged.len());
                merged.push(delta.clone());
            }
            Some(&at) => {
                let existing = &mut merged[at];
                // The reference rule of the upsert, applied as if the deltas came one by one.
                if (delta.reference_explicit || existing.reference.is_none())
                    && delta.reference.is_some()
                {
                    existing.reference = delta.reference.clone();
                }
                existing.reference_explicit |= delta.reference_explicit;
                existing.event_count += delta.event_count;
                existing.first_event_at = existing.first_event_at.min(delta.first_event_at);
                existing.last_event_at = existing.last_event_at.max(delta.last_event_at);
                existing.first_received_at =
                    existing.first_received_at.min(delta.first_received_at);
                existing.last_received_at = existing.last_received_at.max(delta.last_received_at);
            }
        }
    }
    merged.sort_by(|a, b| {
        (a.survey_id.as_str(), a.identifier.as_str())
            .cmp(&(b.survey_id.as_str(), b.identifier.as_str()))
    });
    merged
}

crate::shared::impl_surveys!(PgCatalog, {
    async fn apply_session_stats(
        &self,
        instance: &str,
        epoch: i64,
        through_lsn: u64,
        deltas: &[SessionDelta],
    ) -> Result<()> {
        let deltas = merge_deltas(deltas);
        let mut tx = self.pool.begin().await?;
        // The fence: `FOR SHARE` holds the instance's row until commit, so an erasure cannot
        // fence the epoch between this check and the statistics landing.
        let fenced: Option<bool> = sqlx::query_scalar(
            "SELECT fenced_epoch >= $2 FROM instances WHERE instance_id = $1 FOR SHARE",
        )
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
        let surveys: Vec<String> = deltas
            .iter()
            .map(|d| d.survey_id.as_str().to_owned())
            .collect();
        let identifiers: Vec<String> = deltas.iter().map(|d| d.identifier.clone()).collect();
        let mut touched = if deltas.is_empty() {
            Vec::new()
        } else {
            Self::references_of(&mut tx, &surveys, &identifiers).await?
        };
        let mut inserted = 0;
        if !deltas.is_empty() {
            // One statement whatever the batch size: the columns travel as nine arrays.
            let rows = sqlx::query(
                "INSERT INTO sessions (survey_id, identifier, reference, reference_explicit,
                                       event_count, first_event_at, last_event_at,
                                       first_received_at, last_received_at)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[],
                                      $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::int8[])
                 ON CONFLICT (survey_id, identifier) DO UPDATE SET
                     reference = CASE WHEN excluded.reference_explicit
                                      THEN excluded.reference
                                      ELSE coalesce(sessions.reference, excluded.reference) END,
                     reference_explicit = sessions.reference_explicit OR excluded.reference_explicit,
                     event_count = sessions.event_count + excluded.event_count,
                     first_event_at = LEAST(sessions.first_event_at, excluded.first_event_at),
                     last_event_at = GREATEST(sessions.last_event_at, excluded.last_event_at),
                     first_received_at = LEAST(sessions.first_received_at,
                                               excluded.first_received_at),
                     last_received_at = GREATEST(sessions.last_received_at,
                                                 excluded.last_received_at)
                 RETURNING (xmax = 0) AS inserted",
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.survey_id.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.identifier.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.reference.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.reference_explicit)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| to_i64(d.event_count))
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.first_event_at)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.last_event_at)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.first_received_at)
                    .collect::<Vec<_>>(),
            )
            .bind(
                deltas
                    .iter()
                    .map(|d| d.last_received_at)
                    .collect::<Vec<_>>(),
            )
            .fetch_all(&mut *tx)
            .await?;
            inserted = rows
                .iter()
                .filter(|row| row.try_get::<bool, _>("inserted").unwrap_or(false))
                .count() as u64;
            touched.extend(Self::references_of(&mut tx, &surveys, &identifiers).await?);
            Self::refresh_summaries(&mut tx, &touched).await?;
        }
        set_watermark(&mut tx, instance, WalConsumer::Stats, through_lsn).await?;
        tx.commit().await?;
        let new = self
            .inserted_since_analyze
            .fetch_add(inserted, Ordering::Relaxed)
            + inserted;
        if new >= ANALYZE_AFTER_NEW_SESSIONS {
            self.inserted_since_analyze.store(0, Ordering::Relaxed);
            // Committed already: a failure here only leaves the statistics to autovacuum.
            if let Err(error) = self.vacuum("ANALYZE sessions, reference_summaries").await {
                tracing::warn!(%error, "could not analyze the sessions' tables");
            }
        }
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
        // size: the row holds the sessions' summed statistics and the latest score.
        let rows = sqlx::query(
            "SELECT r.reference, r.event_count, r.first_event_at, r.last_event_at,
                    r.human_score_percent, r.score_band, r.scored_at, r.model_version
             FROM (SELECT DISTINCT unnest($2::text[]) AS reference) w
             JOIN reference_summaries r ON r.survey_id = $1 AND r.reference = w.reference",
        )
        .bind(survey.as_str())
        .bind(references)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let percent: Option<f64> = row.try_get("human_score_percent")?;
                let band: Option<String> = row.try_get("score_band")?;
                let scored_at: Option<i64> = row.try_get("scored_at")?;
                let model: Option<String> = row.try_get("model_version")?;
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
                let event_count: Option<i64> = row.try_get("event_count")?;
                Ok(SessionSummary {
                    reference: row.try_get("reference")?,
                    event_count: event_count.unwrap_or(0).max(0) as u64,
                    first_event_at: row.try_get("first_event_at")?,
                    last_event_at: row.try_get("last_event_at")?,
                    score,
                })
            })
            .collect()
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
            "SELECT identifier, reference FROM sessions
             WHERE survey_id = $1 AND identifier = ANY($2) AND reference IS NOT NULL",
        )
        .bind(survey.as_str())
        .bind(identifiers)
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
            "SELECT identifier FROM sessions WHERE survey_id = $1 AND reference = $2",
        )
        .bind(survey.as_str())
        .bind(reference)
        .fetch_all(&self.pool)
        .await?)
    }
});
