//! The shared methods of a survey's review desk: its scored references counted by band and
//! score bin, listed a page at a time in score order, and the places of the clustered ones.
//! Tombstoned references are left out at once, before their erasure runs.

/// `impl Desk for $backend`. Uses `$backend`'s `SCORE_BIN` (a score's histogram bin),
/// `BY_SCORE` and `LIVE_REFERENCES` (index hints), `IN_LIST_2` and `bound_list`.
macro_rules! impl_desk {
    ($backend:ty) => {
        #[async_trait::async_trait]
        impl $crate::Desk for $backend {
            async fn desk_counts(&self, survey: &SurveyId) -> Result<DeskCounts> {
                let bin = <$backend>::SCORE_BIN;
                let by_score = <$backend>::BY_SCORE;
                let live = <$backend>::LIVE_REFERENCES;
                // Every scored reference's entry in the score index (no table row is read),
                // then the few tombstoned ones subtracted.
                let all: Vec<(String, i64, i64)> = sqlx::query_as(&format!(
                    "SELECT score_band, {bin} AS bin, count(*) FROM reference_summaries {by_score}
                     WHERE survey_id = $1 AND human_score_percent IS NOT NULL
                     GROUP BY score_band, bin"
                ))
                .bind(survey.as_str())
                .fetch_all(&self.pool)
                .await?;
                let erased: Vec<(String, i64, i64)> = sqlx::query_as(&format!(
                    "SELECT score_band, {bin} AS bin, count(*)
                     FROM tombstones t JOIN reference_summaries r
                       ON r.survey_id = t.survey_id AND r.reference = t.reference
                     WHERE t.survey_id = $1 AND human_score_percent IS NOT NULL
                     GROUP BY score_band, bin"
                ))
                .bind(survey.as_str())
                .fetch_all(&self.pool)
                .await?;
                let (unscored, erased_unscored): (i64, i64) = sqlx::query_as(&format!(
                    "SELECT
                        (SELECT count(*) FROM reference_summaries {live}
                          WHERE survey_id = $1 AND sessions > 0 AND scored_at IS NULL),
                        (SELECT count(*) FROM tombstones t JOIN reference_summaries r
                            ON r.survey_id = t.survey_id AND r.reference = t.reference
                          WHERE t.survey_id = $1 AND r.sessions > 0 AND r.scored_at IS NULL)"
                ))
                .bind(survey.as_str())
                .fetch_one(&self.pool)
                .await?;
                Ok($crate::shared::desk::counts(all, erased, unscored - erased_unscored))
            }

            async fn desk_page(&self, survey: &SurveyId, query: &DeskQuery) -> Result<Vec<DeskRow>> {
                let limit = i64::from(query.limit.clamp(1, 1000));
                let columns = $crate::shared::desk::DESK_COLUMNS;
                if let Some(references) = &query.references {
                    // A cluster's members: few, read by reference and ordered here.
                    let in_list_2 = <$backend>::IN_LIST_2;
                    let rows = sqlx::query(&format!(
                        "SELECT {columns} FROM reference_summaries r
                         WHERE r.survey_id = $1 AND r.reference {in_list_2}
                           AND r.human_score_percent IS NOT NULL
                           AND NOT EXISTS (SELECT 1 FROM tombstones t
                                           WHERE t.survey_id = r.survey_id AND t.reference = r.reference)"
                    ))
                    .bind(survey.as_str())
                    .bind(<$backend>::bound_list(references))
                    .fetch_all(&self.pool)
                    .await?;
                    let rows = rows.iter().map(rows::desk_row).collect::<Result<Vec<_>>>()?;
                    return Ok($crate::shared::desk::page_of(rows, query, limit as usize));
                }
                let by_score = <$backend>::BY_SCORE;
                let (comparison, direction, start) = match query.order {
                    DeskOrder::Ascending => (">", "ASC", -1.0),
                    DeskOrder::Descending => ("<", "DESC", 1_000.0),
                };
                let (after_score, after_reference) = query
                    .after
                    .clone()
                    .unwrap_or((start, String::new()));
                let rows = sqlx::query(&format!(
                    "SELECT {columns} FROM reference_summaries r {by_score}
                     WHERE r.survey_id = $1 AND r.human_score_percent IS NOT NULL
                       AND (CAST($2 AS TEXT) IS NULL OR r.score_band = $2)
                       AND (r.human_score_percent, r.reference) {comparison} ($3, $4)
                       AND NOT EXISTS (SELECT 1 FROM tombstones t
                                       WHERE t.survey_id = r.survey_id AND t.reference = r.reference)
                     ORDER BY r.human_score_percent {direction}, r.reference {direction}
                     LIMIT $5"
                ))
                .bind(survey.as_str())
                .bind(query.band.as_deref())
                .bind(after_score)
                .bind(after_reference)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::desk_row).collect()
            }

            async fn latest_scoring_run(&self, survey: &SurveyId) -> Result<Option<ScoringRun>> {
                let row = sqlx::query(&format!(
                    "SELECT {RUN_COLUMNS} FROM scoring_runs WHERE survey_id = $1
                     ORDER BY created_at DESC, id DESC LIMIT 1"
                ))
                .bind(survey.as_str())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(rows::scoring_run).transpose()
            }

            async fn desk_version(&self, survey: &SurveyId) -> Result<DeskVersion> {
                let (runs, ended_runs, erased): (i64, i64, i64) = sqlx::query_as(
                    "SELECT (SELECT count(*) FROM scoring_runs WHERE survey_id = $1),
                            (SELECT count(*) FROM scoring_runs
                              WHERE survey_id = $1 AND status <> 'running'),
                            (SELECT count(*) FROM tombstones WHERE survey_id = $1)",
                )
                .bind(survey.as_str())
                .fetch_one(&self.pool)
                .await?;
                let count = |n: i64| u64::try_from(n).unwrap_or(0);
                Ok(DeskVersion {
                    runs: count(runs),
                    ended_runs: count(ended_runs),
                    erased: count(erased),
                })
            }

            async fn clustered_places(&self, survey: &SurveyId) -> Result<Vec<ClusteredPlace>> {
                // The clustered references (few) with the keys of their places, then the place
                // of each in the modality it clustered in, found by its cell (`cohort_points`
                // has no index by reference).
                let rows = sqlx::query(
                    "SELECT r.reference, r.cluster_modality, r.cohort_cells
                     FROM reference_summaries r
                     WHERE r.survey_id = $1 AND r.cluster_modality IS NOT NULL
                       AND NOT EXISTS (SELECT 1 FROM tombstones t
                                       WHERE t.survey_id = r.survey_id AND t.reference = r.reference)",
                )
                .bind(survey.as_str())
                .fetch_all(&self.pool)
                .await?;
                let mut wanted = std::collections::HashSet::new();
                let mut probes = Vec::new();
                for row in &rows {
                    let modality = $crate::rows::Columns::int(row, "cluster_modality")?;
                    for (reference, cell) in $crate::rows::reference_cells(row)? {
                        if i64::from(cell.modality) == modality {
                            probes.push($crate::model::CohortProbe {
                                modality: cell.modality,
                                mask: cell.mask,
                                cells: (cell.cell, cell.cell),
                            });
                            wanted.insert((reference, cell.modality));
                        }
                    }
                }
                probes.sort_unstable();
                probes.dedup();
                let mut places: Vec<ClusteredPlace> = self
                    .find_cohort_points(survey.as_str(), &probes)
                    .await?
                    .into_iter()
                    .filter(|found| wanted.contains(&(found.reference.clone(), found.point.modality)))
                    .map(|found| ClusteredPlace {
                        reference: found.reference,
                        point: found.point,
                    })
                    .collect();
                places.sort_unstable_by(|a, b| {
                    (a.point.modality, &a.reference).cmp(&(b.point.modality, &b.reference))
                });
                Ok(places)
            }
        }
    };
}

pub(crate) use impl_desk;

use crate::model::{DESK_HISTOGRAM_BINS, DeskCounts, DeskOrder, DeskQuery, DeskRow};

/// The columns [`rows::desk_row`](crate::rows::desk_row) reads, of `reference_summaries r`.
pub(crate) const DESK_COLUMNS: &str = "r.reference, r.human_score_percent, r.score_band, \
     r.scored_at, r.model_version, r.reasons, r.cluster_modality, r.cohort_alike, \
     r.event_count, r.first_event_at, r.last_event_at";

/// Counts per band and bin, less the tombstoned ones.
pub(crate) fn counts(
    all: Vec<(String, i64, i64)>,
    erased: Vec<(String, i64, i64)>,
    unscored: i64,
) -> DeskCounts {
    let mut bands: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    let mut histogram = vec![0i64; DESK_HISTOGRAM_BINS];
    for (sign, rows) in [(1, all), (-1, erased)] {
        for (band, bin, count) in rows {
            let bin = usize::try_from(bin)
                .unwrap_or(0)
                .min(DESK_HISTOGRAM_BINS - 1);
            histogram[bin] += sign * count;
            *bands.entry(band).or_default() += sign * count;
        }
    }
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    DeskCounts {
        bands: bands
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(band, n)| (band, count(n)))
            .collect(),
        histogram: histogram.into_iter().map(count).collect(),
        unscored: count(unscored),
    }
}

/// One page of `rows` (a cluster's members) as the index would give it: filtered by band,
/// in the query's order, after its keyset.
pub(crate) fn page_of(mut rows: Vec<DeskRow>, query: &DeskQuery, limit: usize) -> Vec<DeskRow> {
    let key = |row: &DeskRow| (row.human_score_percent, row.reference.clone());
    rows.retain(|row| {
        query
            .band
            .as_deref()
            .is_none_or(|band| row.score_band == band)
    });
    rows.sort_by(|a, b| {
        let order = key(a)
            .partial_cmp(&key(b))
            .unwrap_or(std::cmp::Ordering::Equal);
        match query.order {
            DeskOrder::Ascending => order,
            DeskOrder::Descending => order.reverse(),
        }
    });
    if let Some(after) = &query.after {
        rows.retain(|row| {
            let here = key(row);
            match query.order {
                DeskOrder::Ascending => {
                    here.partial_cmp(after) == Some(std::cmp::Ordering::Greater)
                }
                DeskOrder::Descending => here.partial_cmp(after) == Some(std::cmp::Ordering::Less),
            }
        });
    }
    rows.truncate(limit);
    rows
}
