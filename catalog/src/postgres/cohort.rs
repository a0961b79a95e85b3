//! The survey's cohort kept across runs (`cohort_points`, `cohort_bins`; migration 0007): each
//! scored session's places, found by grid cell, and the survey's spread in percentile bins. A
//! reference's places are found by the keys its summary keeps (`cohort_cells`, migration
//! 0010), as on SQLite.

use sqlx::Row;

use super::PgCatalog;
use crate::Result;
use crate::model::{
    CohortBin, CohortCell, CohortPoint, CohortProbe, NewScore, StoredCohortPoint, cohort_bin_deltas,
};
use crate::rows;

impl PgCatalog {
    /// The keys of the places `references` have stored (`reference_summaries.cohort_cells`),
    /// each with its reference. Read before a record writes their summaries.
    pub(crate) async fn stored_cells(
        tx: &mut sqlx::PgConnection,
        survey: &str,
        references: &[String],
    ) -> Result<Vec<(String, CohortCell)>> {
        if references.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT reference, cohort_cells FROM reference_summaries
             WHERE survey_id = $1 AND reference = ANY($2::text[]) AND cohort_cells IS NOT NULL",
        )
        .bind(survey)
        .bind(references)
        .fetch_all(&mut *tx)
        .await?;
        let mut cells = Vec::new();
        for row in &rows {
            cells.extend(rows::reference_cells(row)?);
        }
        Ok(cells)
    }

    /// Replaces the points of each reference of `scores` (one score a reference) with the ones
    /// it carries, and moves the survey's bins with them; `had` are the keys of the points they
    /// had ([`Self::stored_cells`]).
    pub(crate) async fn replace_cohort_points(
        tx: &mut sqlx::PgConnection,
        survey: &str,
        scores: &[&NewScore],
        had: &[(String, CohortCell)],
    ) -> Result<()> {
        let removed = Self::take_cohort_points(tx, survey, had).await?;
        let added: Vec<(&str, &CohortPoint)> = scores
            .iter()
            .flat_map(|s| s.cohort.iter().map(|p| (s.reference.as_str(), p)))
            .collect();
        if !added.is_empty() {
            sqlx::query(
                "INSERT INTO cohort_points (survey_id, modality, mask, cell, reference, point)
                 SELECT $1::text, * FROM unnest($2::int8[], $3::int8[], $4::int8[], $5::text[],
                                                $6::bytea[])
                 ON CONFLICT (survey_id, modality, mask, cell, reference)
                 DO UPDATE SET point = excluded.point",
            )
            .bind(survey)
            .bind(
                added
                    .iter()
                    .map(|(_, p)| i64::from(p.modality))
                    .collect::<Vec<_>>(),
            )
            .bind(
                added
                    .iter()
                    .map(|(_, p)| i64::from(p.mask))
                    .collect::<Vec<_>>(),
            )
            .bind(added.iter().map(|(_, p)| p.cell).collect::<Vec<_>>())
            .bind(
                added
                    .iter()
                    .map(|(r, _)| (*r).to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                added
                    .iter()
                    .map(|(_, p)| p.encode_values())
                    .collect::<Vec<_>>(),
            )
            .execute(&mut *tx)
            .await?;
        }
        let added: Vec<CohortPoint> = added.into_iter().map(|(_, p)| p.clone()).collect();
        Self::move_cohort_bins(tx, survey, &cohort_bin_deltas(&removed, &added)).await
    }

    /// Erases a reference's points and takes them out of the survey's bins (before its summary
    /// row, which keeps their keys, is deleted).
    pub(crate) async fn erase_cohort_points(
        tx: &mut sqlx::PgConnection,
        survey: &str,
        reference: &str,
    ) -> Result<()> {
        let had = Self::stored_cells(tx, survey, &[reference.to_owned()]).await?;
        let removed = Self::take_cohort_points(tx, survey, &had).await?;
        Self::move_cohort_bins(tx, survey, &cohort_bin_deltas(&removed, &[])).await
    }

    /// Deletes the points of these keys, returning them: one primary-key descent each.
    async fn take_cohort_points(
        tx: &mut sqlx::PgConnection,
        survey: &str,
        keys: &[(String, CohortCell)],
    ) -> Result<Vec<CohortPoint>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "DELETE FROM cohort_points c
             USING unnest($2::int8[], $3::int8[], $4::int8[], $5::text[])
                   AS k(modality, mask, cell, reference)
             WHERE c.survey_id = $1 AND c.modality = k.modality AND c.mask = k.mask
               AND c.cell = k.cell AND c.reference = k.reference
             RETURNING c.modality, c.mask, c.cell, c.point",
        )
        .bind(survey)
        .bind(
            keys.iter()
                .map(|(_, c)| i64::from(c.modality))
                .collect::<Vec<_>>(),
        )
        .bind(
            keys.iter()
                .map(|(_, c)| i64::from(c.mask))
                .collect::<Vec<_>>(),
        )
        .bind(keys.iter().map(|(_, c)| c.cell).collect::<Vec<_>>())
        .bind(keys.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?;
        rows.iter().map(rows::cohort_point).collect()
    }

    async fn move_cohort_bins(
        tx: &mut sqlx::PgConnection,
        survey: &str,
        deltas: &[CohortBin],
    ) -> Result<()> {
        if deltas.is_empty() {
            return Ok(());
        }
        let column = |f: fn(&CohortBin) -> i64| deltas.iter().map(f).collect::<Vec<i64>>();
        sqlx::query(
            "INSERT INTO cohort_bins (survey_id, modality, mask, axis, bin, sessions)
             SELECT $1::text, * FROM unnest($2::int8[], $3::int8[], $4::int8[], $5::int8[],
                                            $6::int8[])
             ON CONFLICT (survey_id, modality, mask, axis, bin) DO UPDATE SET
                 sessions = cohort_bins.sessions + excluded.sessions",
        )
        .bind(survey)
        .bind(column(|d| i64::from(d.modality)))
        .bind(column(|d| i64::from(d.mask)))
        .bind(column(|d| i64::from(d.axis)))
        .bind(column(|d| i64::from(d.bin)))
        .bind(column(|d| d.sessions))
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM cohort_bins WHERE survey_id = $1 AND sessions <= 0")
            .bind(survey)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// The stored points of `probes`' (modality, mask) whose cell is in the probe's range.
    pub(crate) async fn find_cohort_points(
        &self,
        survey: &str,
        probes: &[CohortProbe],
    ) -> Result<Vec<StoredCohortPoint>> {
        if probes.is_empty() {
            return Ok(Vec::new());
        }
        let column = |f: fn(&CohortProbe) -> i64| probes.iter().map(f).collect::<Vec<i64>>();
        let rows = sqlx::query(
            "SELECT c.reference, c.modality, c.mask, c.cell, c.point
             FROM unnest($2::int8[], $3::int8[], $4::int8[], $5::int8[])
                  AS p(modality, mask, low, high)
             JOIN cohort_points c
               ON c.survey_id = $1 AND c.modality = p.modality AND c.mask = p.mask
              AND c.cell BETWEEN p.low AND p.high",
        )
        .bind(survey)
        .bind(column(|p| i64::from(p.modality)))
        .bind(column(|p| i64::from(p.mask)))
        .bind(column(|p| p.cells.0))
        .bind(column(|p| p.cells.1))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(StoredCohortPoint {
                    reference: row.try_get("reference")?,
                    point: rows::cohort_point(row)?,
                })
            })
            .collect()
    }
}
