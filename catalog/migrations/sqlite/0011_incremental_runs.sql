-- Incremental scoring runs (issue 56): a run that scores N new sessions of a survey of M reads
-- in proportion to N.
--
-- When the collector received a session's first and last batch (its log records' time, the
-- `events` rows' `received_at`): a run reads only the `events` files whose `received_at` range
-- (the Delta log's statistics) meets its sessions'. NULL for sessions counted before this
-- migration until their next batch; a run reads every file for those.
ALTER TABLE sessions ADD COLUMN first_received_at INTEGER;
ALTER TABLE sessions ADD COLUMN last_received_at INTEGER;

-- The survey's references that have sessions, by whether they have a score: a run plans from
-- the unscored entries (scored_at IS NULL) and counts the rest in this index alone (`sessions`
-- in it too, so that SQLite counts from the index without reading each row: 9 ms for 100,000
-- references instead of 49).
CREATE INDEX reference_summaries_live ON reference_summaries (survey_id, scored_at, sessions)
    WHERE sessions > 0;

-- The references a run scored: a resumed run's count, the clean-up of an earlier attempt.
CREATE INDEX session_scores_by_run ON session_scores (survey_id, run_id);
