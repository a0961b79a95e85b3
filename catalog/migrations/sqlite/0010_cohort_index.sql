-- The survey's cohort kept across runs (issue 56): each scored session's place in each
-- modality it was placed in, found by grid cell, and per (modality, mask, axis) how many of the
-- survey's places fall in each percentile bin (its spread, for the count expected by chance).
-- Written with the scores in record_scores' transaction; erasure takes a reference's points
-- and their counts. Sessions scored before this migration have no point until a run scores
-- them again (a `force` run places every one).
CREATE TABLE cohort_points (
    survey_id TEXT NOT NULL,
    modality  INTEGER NOT NULL,
    mask      INTEGER NOT NULL,
    cell      INTEGER NOT NULL,
    reference TEXT NOT NULL,
    point     BLOB NOT NULL,
    PRIMARY KEY (survey_id, modality, mask, cell, reference)
) WITHOUT ROWID;

CREATE INDEX cohort_points_by_reference ON cohort_points (survey_id, reference);

CREATE TABLE cohort_bins (
    survey_id TEXT NOT NULL,
    modality  INTEGER NOT NULL,
    mask      INTEGER NOT NULL,
    axis      INTEGER NOT NULL,
    bin       INTEGER NOT NULL,
    sessions  INTEGER NOT NULL,
    PRIMARY KEY (survey_id, modality, mask, axis, bin)
) WITHOUT ROWID;
