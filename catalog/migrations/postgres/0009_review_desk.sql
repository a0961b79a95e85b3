-- A survey's review desk (issue 57): what its list shows of each scored reference, kept with
-- the score on the lookup row: the score's reasons (a JSON array of strings, most important
-- first) and, when the run found the session in a cluster of its survey, the modality it
-- clustered in (0 pointing, 1 typing, 2 touch) and how many sessions were alike with it.
-- NULL for scores recorded before this migration until a run scores them again.
ALTER TABLE reference_summaries ADD COLUMN reasons TEXT;
ALTER TABLE reference_summaries ADD COLUMN cluster_modality BIGINT;
ALTER TABLE reference_summaries ADD COLUMN cohort_alike BIGINT;

-- The desk's list: a survey's scored references by score, then reference (pages by keyset),
-- and the counts per band and score bin read off the same entries.
CREATE INDEX reference_summaries_by_score
    ON reference_summaries (survey_id, human_score_percent, reference, score_band)
    WHERE human_score_percent IS NOT NULL;

-- The survey's clustered references (few), for the desk's clusters.
CREATE INDEX reference_summaries_clustered
    ON reference_summaries (survey_id, cluster_modality, reference)
    WHERE cluster_modality IS NOT NULL;
