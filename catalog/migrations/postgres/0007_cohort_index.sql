-- The survey's cohort kept across runs (issue 56): each scored session's place in each
-- modality it was placed in, found by grid cell, and per (modality, mask, axis) how many of the
-- survey's places fall in each percentile bin (its spread, for the count expected by chance).
-- Written with the scores in record_scores' transaction; erasure takes a reference's points
-- and their counts. Sessions scored before this migration have no point until a run scores
-- them again (a `force` run places every one).
CREATE TABLE cohort_points (
    survey_id TEXT NOT NULL,
    modality  BIGINT NOT NULL,
    mask      BIGINT NOT NULL,
    cell      BIGINT NOT NULL,
    reference TEXT NOT NULL,
    point     BYTEA NOT NULL,
    PRIMARY KEY (survey_id, modality, mask, cell, reference)
);

CREATE INDEX cohort_points_by_reference ON cohort_points (survey_id, reference);

CREATE TABLE cohort_bins (
    survey_id TEXT NOT NULL,
    modality  BIGINT NOT NULL,
    mask      BIGINT NOT NULL,
    axis      BIGINT NOT NULL,
    bin       BIGINT NOT NULL,
    sessions  BIGINT NOT NULL,
    PRIMARY KEY (survey_id, modality, mask, axis, bin)
);
