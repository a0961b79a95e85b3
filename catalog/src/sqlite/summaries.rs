//! What a lookup answers, kept per (survey, reference) in `reference_summaries` (migration
//! 0009): refreshed from the sessions linked to a reference whenever they change.

use sqlx::QueryBuilder;

use super::{MAX_ROWS_PER_STATEMENT, SqliteCatalog};
use crate::Result;

impl SqliteCatalog {
    /// The (survey, reference) pairs the sessions of `keys` (survey, identifier) are linked to
    /// now: a reference a statistics upsert may move away from, or an erasure take.
    pub(crate) async fn references_of(
        tx: &mut sqlx::SqliteConnection,
        keys: &[(&str, &str)],
    ) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for chunk in keys.chunks(MAX_ROWS_PER_STATEMENT / 2) {
            let mut query = QueryBuilder::new("WITH k(survey_id, identifier) AS (");
            query.push_values(chunk, |mut row, (survey, identifier)| {
                row.push_bind(*survey).push_bind(*identifier);
            });
            query.push(
                ") SELECT s.survey_id, s.reference FROM k JOIN sessions s
                     ON s.survey_id = k.survey_id AND s.identifier = k.identifier
                   WHERE s.reference IS NOT NULL",
            );
            let rows: Vec<(String, String)> = query.build_query_as().fetch_all(&mut *tx).await?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// Recomputes what a lookup answers of each (survey, reference) of `pairs` from the sessions
    /// linked to it (`reference_summaries`); a pair with neither a session nor a score goes.
    pub(crate) async fn refresh_summaries(
        tx: &mut sqlx::SqliteConnection,
        pairs: &[(String, String)],
    ) -> Result<()> {
        let mut pairs: Vec<&(String, String)> = pairs.iter().collect();
        pairs.sort();
        pairs.dedup();
        for chunk in pairs.chunks(MAX_ROWS_PER_STATEMENT / 2) {
            let mut query = QueryBuilder::new("WITH a(survey_id, reference) AS (");
            query.push_values(chunk, |mut row, (survey, reference)| {
                row.push_bind(survey).push_bind(reference);
            });
            // INDEXED BY: without statistics the planner would take the primary key's
            // `survey_id` prefix and scan the survey's sessions once per reference.
            query.push(
                ") INSERT INTO reference_summaries
                       (survey_id, reference, event_count, first_event_at, last_event_at, sessions)
                   SELECT a.survey_id, a.reference, coalesce(sum(s.event_count), 0),
                          min(s.first_event_at), max(s.last_event_at), count(s.identifier)
                   FROM a LEFT JOIN sessions s INDEXED BY sessions_by_reference
                     ON s.survey_id = a.survey_id AND s.reference = a.reference
                   GROUP BY a.survey_id, a.reference
                   ON CONFLICT (survey_id, reference) DO UPDATE SET
                       event_count = excluded.event_count,
                       first_event_at = excluded.first_event_at,
                       last_event_at = excluded.last_event_at,
                       sessions = excluded.sessions",
            );
            query.build().execute(&mut *tx).await?;
            let mut gone = QueryBuilder::new(
                "DELETE FROM reference_summaries
                 WHERE sessions = 0 AND human_score_percent IS NULL
                   AND (survey_id, reference) IN (",
            );
            gone.push_values(chunk, |mut row, (survey, reference)| {
                row.push_bind(survey).push_bind(reference);
            });
            gone.push(")");
            gone.build().execute(&mut *tx).await?;
        }
        Ok(())
    }
}
