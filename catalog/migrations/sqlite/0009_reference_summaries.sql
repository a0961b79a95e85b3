-- What a lookup answers, one row per (survey, reference): the summed statistics of the sessions
-- linked to the reference and its latest score. Kept by the statistics upserts, the score
-- records and erasure in the same transactions; a lookup reads one row a reference (issue 56:
-- it read the sessions' covering index and the scores' primary key, two B-tree searches a
-- reference).
CREATE TABLE reference_summaries (
    survey_id           TEXT NOT NULL,
    reference           TEXT NOT NULL,
    event_count         INTEGER NOT NULL DEFAULT 0,
    first_event_at      INTEGER,
    last_event_at       INTEGER,
    sessions            INTEGER NOT NULL DEFAULT 0,
    human_score_percent REAL,
    score_band          TEXT,
    scored_at           INTEGER,
    model_version       TEXT,
    PRIMARY KEY (survey_id, reference)
) WITHOUT ROWID;

INSERT INTO reference_summaries
    (survey_id, reference, event_count, first_event_at, last_event_at, sessions)
SELECT survey_id, reference, sum(event_count), min(first_event_at), max(last_event_at), count(*)
FROM sessions WHERE reference IS NOT NULL
GROUP BY survey_id, reference;

INSERT INTO reference_summaries
    (survey_id, reference, human_score_percent, score_band, scored_at, model_version)
SELECT survey_id, reference, human_score_percent, score_band, scored_at, model_version
FROM session_scores WHERE true
ON CONFLICT (survey_id, reference) DO UPDATE SET
    human_score_percent = excluded.human_score_percent,
    score_band = excluded.score_band,
    scored_at = excluded.scored_at,
    model_version = excluded.model_version;
