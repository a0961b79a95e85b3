-- A reference's cohort places found by the keys its summary keeps, not by an index (issue 56,
-- item 4; the same as SQLite's 0013): a JSON array of [modality, mask, cell], NULL when the
-- reference has no place.
ALTER TABLE reference_summaries ADD COLUMN cohort_cells TEXT;

UPDATE reference_summaries r
   SET cohort_cells = c.cells
  FROM (SELECT survey_id, reference,
               json_agg(json_build_array(modality, mask, cell))::text AS cells
          FROM cohort_points
         GROUP BY survey_id, reference) c
 WHERE c.survey_id = r.survey_id AND c.reference = r.reference;

DROP INDEX cohort_points_by_reference;
