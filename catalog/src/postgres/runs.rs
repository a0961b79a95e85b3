//! The runs role on PostgreSQL (`crate::Runs`): the fenced record of a step's scores.

use super::*;

crate::shared::impl_runs!(PgCatalog, {
    async fn record_scores_when(
        &self,
        survey: &SurveyId,
        run: &RunId,
        owner: &str,
        scores: &[NewScore],
        ready: crate::Ready<'_>,
    ) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        // The fence: only the run's current owner may publish. `FOR SHARE` holds the run row
        // until commit, so a claim by another instance waits and cannot interleave.
        let owned: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM scoring_runs WHERE id = $1 AND owner = $2 AND status = 'running'
             FOR SHARE",
        )
        .bind(run.as_str())
        .bind(owner)
        .fetch_optional(&mut *tx)
        .await?;
        if owned.is_none() {
            return Ok(false);
        }
        // A reference scored twice in one call keeps its last score, as sequential upserts
        // would (one statement may not update a row twice).
        let mut last_of: HashMap<&str, &NewScore> = HashMap::with_capacity(scores.len());
        for score in scores {
            last_of.insert(score.reference.as_str(), score);
        }
        let mut scores: Vec<&NewScore> = last_of.into_values().collect();
        // In reference order: the indexes are written front to back, and rows are locked in
        // one order whoever writes them.
        scores.sort_unstable_by(|a, b| a.reference.cmp(&b.reference));
        let references: Vec<String> = scores.iter().map(|s| s.reference.clone()).collect();
        let had = Self::stored_cells(&mut tx, survey.as_str(), &references).await?;
        if !scores.is_empty() {
            // The scores, and what a lookup answers of each (`reference_summaries`), in one
            // statement.
            sqlx::query(
                "WITH scored AS (
                     INSERT INTO session_scores (survey_id, reference, human_score_percent,
                                                 score_band, scored_at, model_version, run_id)
                     SELECT $1::text, * FROM unnest($2::text[], $3::float8[], $4::text[],
                                                    $5::int8[], $6::text[], $7::text[])
                     ON CONFLICT (survey_id, reference) DO UPDATE SET
                         human_score_percent = excluded.human_score_percent,
                         score_band = excluded.score_band,
                         scored_at = excluded.scored_at,
                         model_version = excluded.model_version,
                         run_id = excluded.run_id
                     RETURNING survey_id, reference, human_score_percent, score_band, scored_at,
                               model_version),
                 desk (reference, reasons, cluster_modality, cohort_alike, cohort_cells,
                       scored_events) AS (
                     SELECT * FROM unnest($2::text[], $8::text[], $9::int8[], $10::int8[],
                                          $11::text[], $12::int8[]))
                 INSERT INTO reference_summaries (survey_id, reference, human_score_percent,
                                                  score_band, scored_at, model_version, reasons,
                                                  cluster_modality, cohort_alike, cohort_cells,
                                                  scored_events)
                 SELECT s.survey_id, s.reference, s.human_score_percent, s.score_band,
                        s.scored_at, s.model_version, d.reasons, d.cluster_modality,
                        d.cohort_alike, d.cohort_cells, d.scored_events
                 FROM scored s JOIN desk d ON d.reference = s.reference
                 ON CONFLICT (survey_id, reference) DO UPDATE SET
                     human_score_percent = excluded.human_score_percent,
                     score_band = excluded.score_band,
                     scored_at = excluded.scored_at,
                     model_version = excluded.model_version,
                     reasons = excluded.reasons,
                     cluster_modality = excluded.cluster_modality,
                     cohort_alike = excluded.cohort_alike,
                     cohort_cells = excluded.cohort_cells,
                     scored_events = excluded.scored_events",
            )
            .bind(survey.as_str())
            .bind(
                scores
                    .iter()
                    .map(|s| s.reference.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.human_score_percent)
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.score_band.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(scores.iter().map(|s| s.scored_at).collect::<Vec<_>>())
            .bind(
                scores
                    .iter()
                    .map(|s| s.model_version.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.run_id.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| rows::reasons_json(&s.reasons))
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.cluster.map(|(modality, _)| i64::from(modality)))
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| s.cluster.map(|(_, alike)| i64::from(alike)))
                    .collect::<Vec<_>>(),
            )
            .bind(
                scores
                    .iter()
                    .map(|s| rows::cohort_cells_json(&s.cohort))
                    .collect::<Vec<_>>(),
            )
            .bind(scores.iter().map(|s| to_i64(s.events)).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
            Self::replace_cohort_points(&mut tx, survey.as_str(), &scores, &had).await?;
        }
        if !ready.await {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }
});
