-- A reference's cohort places found by the keys its summary keeps, not by an index (issue 56,
-- item 4): `cohort_points` is written in cell order, and its second B-tree, by reference, was
-- written in another order, 0.6 s of a full run's 2 s record (benches/README.md). The keys: a
-- JSON array of [modality, mask, cell], NULL when the reference has no place. A record reads
-- them before it replaces the places; erasure reads them before it deletes the summary.
ALTER TABLE reference_summaries ADD COLUMN cohort_cells TEXT;

UPDATE reference_summaries
   SET cohort_cells = (SELECT json_group_array(json_array(p.modality, p.mask, p.cell))
                       FROM cohort_points p
                       WHERE p.survey_id = reference_summaries.survey_id
                         AND p.reference = reference_summaries.reference)
 WHERE EXISTS (SELECT 1 FROM cohort_points p
               WHERE p.survey_id = reference_summaries.survey_id
                 AND p.reference = reference_summaries.reference);

DROP INDEX cohort_points_by_reference;
