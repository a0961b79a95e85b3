//! The survey's cohort kept across runs (`cohort_points`, `cohort_bins`; migration 0010): each
//! scored session's places, found by grid cell, and the survey's spread in percentile bins. A
//! reference's places are found by the keys its summary keeps (`cohort_cells`, migration 0013),
//! not by an index: a run writes the places in cell order, and a second B-tree in reference
//! order cost a full run's record 0.6 s of 2 s.

use sqlx::{QueryBuilder, Row};

use super::{MAX_ROWS_PER_STATEMENT, RECORD_ROWS_PER_STATEMENT, SqliteCatalog, serde_json_array};
use crate::Result;
use crate::model::{
    CohortBin, CohortCell, CohortPoint, CohortProbe, NewScore, StoredCohortPoint, cohort_bin_deltas,
};
use crate::rows;

impl SqliteCatalog {
    /// The keys of the places `references` have stored (`reference_summaries.cohort_cells`),
    /// each with its reference. Read before a record writes their summaries.
    pub(crate) async fn stored_cells(
        tx: &mut sqlx::SqliteConnection,
        survey: &str,
        references: &[String],
    ) -> Result<Vec<(String, CohortCell)>> {
        let mut cells = Vec::new();
        for chunk in references.chunks(MAX_ROWS_PER_STATEMENT) {
            let rows = sqlx::query(
                "SELECT reference, cohort_cells FROM reference_summaries
                 WHERE survey_id = $1 AND reference IN (SELECT value FROM json_each($2))
                   AND cohort_cells IS NOT NULL",
            )
            .bind(survey)
            .bind(serde_json_array(chunk))
            .fetch_all(&mut *tx)
            .await?;
            for row in &rows {
                cells.extend(rows::reference_cells(row)?);
            }
        }
        Ok(cells)
    }

    /// Replaces the points of each reference of `scores` with the ones it carries, and moves
    /// the survey's bins with them; `had` are the keys of the points they had
    /// ([`Self::stored_cells`]).
    pub(crate) async fn replace_cohort_points(
        tx: &mut sqlx::SqliteConnection,
        survey: &str,
        scores: &[&NewScore],
        had: &[(String, CohortCell)],
    ) -> Result<()> {
        let removed = Self::take_cohort_points(tx, survey, had).await?;
        let mut added: Vec<(&str, &CohortPoint)> = scores
            .iter()
            .flat_map(|s| s.cohort.iter().map(|p| (s.reference.as_str(), p)))
            .collect();
        // In the primary key's order: the B-tree is written front to back.
        added.sort_unstable_by_key(|(reference, p)| (p.modality, p.mask, p.cell, *reference));
        for chunk in added.chunks(RECORD_ROWS_PER_STATEMENT) {
            let mut insert = QueryBuilder::new(
                "INSERT OR REPLACE INTO cohort_points
                     (survey_id, modality, mask, cell, reference, point) ",
            );
            insert.push_values(chunk, |mut row, (reference, point)| {
                row.push_bind(survey)
                    .push_bind(i64::from(point.modality))
                    .push_bind(i64::from(point.mask))
                    .push_bind(point.cell)
                    .push_bind(*reference)
                    .push_bind(point.encode_values());
            });
            insert.build().execute(&mut *tx).await?;
        }
        let added: Vec<CohortPoint> = added.into_iter().map(|(_, p)| p.clone()).collect();
        Self::move_cohort_bins(tx, survey, &cohort_bin_deltas(&removed, &added)).await
    }

    /// Erases a reference's points and takes them out of the survey's bins (before its summary
    /// row, which keeps their keys, is deleted).
    pub(crate) async fn erase_cohort_points(
        tx: &mut sqlx::SqliteConnection,
        survey: &str,
        reference: &str,
    ) -> Result<()> {
        let had = Self::stored_cells(tx, survey, &[reference.to_owned()]).await?;
        let removed = Self::take_cohort_points(tx, survey, &had).await?;
        Self::move_cohort_bins(tx, survey, &cohort_bin_deltas(&removed, &[])).await
    }

    /// Deletes the points of these keys, returning them: one primary-key descent each.
    async fn take_cohort_points(
        tx: &mut sqlx::SqliteConnection,
        survey: &str,
        keys: &[(String, CohortCell)],
    ) -> Result<Vec<CohortPoint>> {
        let mut taken = Vec::new();
        for chunk in keys.chunks(MAX_ROWS_PER_STATEMENT) {
            let list: Vec<(u8, u32, i64, &str)> = chunk
                .iter()
                .map(|(reference, c)| (c.modality, c.mask, c.cell, reference.as_str()))
                .collect();
            let list = serde_json::to_string(&list)
                .map_err(|error| crate::Error::Corrupt(format!("cohort keys: {error}")))?;
            let rows = sqlx::query(
                "DELETE FROM cohort_points
                 WHERE survey_id = $1
                   AND (modality, mask, cell, reference) IN
                       (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
                               json_extract(value, '$[2]'), json_extract(value, '$[3]')
                        FROM json_each($2))
                 RETURNING modality, mask, cell, point",
            )
            .bind(survey)
            .bind(&list)
            .fetch_all(&mut *tx)
            .await?;
            for row in rows {
                taken.push(rows::cohort_point(&row)?);
            }
        }
        Ok(taken)
    }

    async fn move_cohort_bins(
        tx: &mut sqlx::SqliteConnection,
        survey: &str,
        deltas: &[CohortBin],
    ) -> Result<()> {
        for chunk in deltas.chunks(MAX_ROWS_PER_STATEMENT / 6) {
            let mut upsert = QueryBuilder::new(
                "INSERT INTO cohort_bins (survey_id, modality, mask, axis, bin, sessions) ",
            );
            upsert.push_values(chunk, |mut row, delta| {
                row.push_bind(survey)
                    .push_bind(i64::from(delta.modality))
                    .push_bind(i64::from(delta.mask))
                    .push_bind(i64::from(delta.axis))
                    .push_bind(i64::from(delta.bin))
                    .push_bind(delta.sessions);
            });
            upsert.push(
                " ON CONFLICT (survey_id, modality, mask, axis, bin) DO UPDATE SET
                     sessions = cohort_bins.sessions + excluded.sessions",
            );
            upsert.build().execute(&mut *tx).await?;
        }
        if !deltas.is_empty() {
            sqlx::query("DELETE FROM cohort_bins WHERE survey_id = $1 AND sessions <= 0")
                .bind(survey)
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }

    /// The stored points of `probes`' (modality, mask) whose cell is in the probe's range.
    pub(crate) async fn find_cohort_points(
        &self,
        survey: &str,
        probes: &[CohortProbe],
    ) -> Result<Vec<StoredCohortPoint>> {
        let mut found = Vec::new();
        let mut conn = self.pool.acquire().await?;
        for chunk in probes.chunks(MAX_ROWS_PER_STATEMENT / 4) {
            let mut query = QueryBuilder::new("WITH p(modality, mask, low, high) AS (");
            query.push_values(chunk, |mut row, probe| {
                row.push_bind(i64::from(probe.modality))
                    .push_bind(i64::from(probe.mask))
                    .push_bind(probe.cells.0)
                    .push_bind(probe.cells.1);
            });
            query.push(
                ") SELECT c.reference, c.modality, c.mask, c.cell, c.point
                   FROM p JOIN cohort_points c
                     ON c.survey_id = ",
            );
            query.push_bind(survey);
            query.push(
                " AND c.modality = p.modality AND c.mask = p.mask
                   AND c.cell BETWEEN p.low AND p.high",
            );
            for row in query.build().fetch_all(&mut *conn).await? {
                found.push(StoredCohortPoint {
                    reference: row.try_get("reference")?,
                    point: rows::cohort_point(&row)?,
                });
            }
        }
        Ok(found)
    }
}
