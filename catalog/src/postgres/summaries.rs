//! What a lookup answers, kept per (survey, reference) in `reference_summaries` (migration
//! 0006): refreshed from the sessions linked to a reference whenever they change.

use super::PgCatalog;
use crate::Result;

impl PgCatalog {
    /// The (survey, reference) pairs the sessions of `surveys` and `identifiers` (pairwise) are
    /// linked to now: a reference a statistics upsert may move away from.
    pub(crate) async fn references_of(
        tx: &mut sqlx::PgConnection,
        surveys: &[String],
        identifiers: &[String],
    ) -> Result<Vec<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT s.survey_id, s.reference
             FROM unnest($1::text[], $2::text[]) AS k(survey_id, identifier)
             JOIN sessions s ON s.survey_id = k.survey_id AND s.identifier = k.identifier
             WHERE s.reference IS NOT NULL",
        )
        .bind(surveys)
        .bind(identifiers)
        .fetch_all(&mut *tx)
        .await?)
    }

    /// Recomputes what a lookup answers of each (survey, reference) of `pairs` from the sessions
    /// linked to it (`reference_summaries`); a pair with neither a session nor a score goes.
    pub(crate) async fn refresh_summaries(
        tx: &mut sqlx::PgConnection,
        pairs: &[(String, String)],
    ) -> Result<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let mut pairs: Vec<&(String, String)> = pairs.iter().collect();
        pairs.sort();
        pairs.dedup();
        let surveys: Vec<&str> = pairs.iter().map(|(survey, _)| survey.as_str()).collect();
        let references: Vec<&str> = pairs
            .iter()
            .map(|(_, reference)| reference.as_str())
            .collect();
        sqlx::query(
            "INSERT INTO reference_summaries
                 (survey_id, reference, event_count, first_event_at, last_event_at, sessions)
             SELECT a.survey_id, a.reference, s.event_count, s.first_event_at, s.last_event_at,
                    s.sessions
             FROM unnest($1::text[], $2::text[]) AS a(survey_id, reference)
             CROSS JOIN LATERAL (
                 SELECT coalesce(sum(event_count), 0)::int8 AS event_count,
                        min(first_event_at) AS first_event_at, max(last_event_at) AS last_event_at,
                        count(*) AS sessions
                 FROM sessions WHERE survey_id = a.survey_id AND reference = a.reference) s
             ON CONFLICT (survey_id, reference) DO UPDATE SET
                 event_count = excluded.event_count,
                 first_event_at = excluded.first_event_at,
                 last_event_at = excluded.last_event_at,
                 sessions = excluded.sessions",
        )
        .bind(&surveys)
        .bind(&references)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM reference_summaries r
             USING unnest($1::text[], $2::text[]) AS a(survey_id, reference)
             WHERE r.survey_id = a.survey_id AND r.reference = a.reference
               AND r.sessions = 0 AND r.human_score_percent IS NULL",
        )
        .bind(&surveys)
        .bind(&references)
        .execute(&mut *tx)
        .await?;
        Ok(())
    }
}
