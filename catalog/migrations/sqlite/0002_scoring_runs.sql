-- Scoring runs: who asked for a cancel, and which worker holds the run.
--
-- A worker (a server instance, or `telltale score`) owns a running run through a lease it renews
-- with every progress update. Every write of the worker names the owner, so a worker that lost
-- its lease (it stalled, another one claimed the run) can no longer change the run: a fence.
ALTER TABLE scoring_runs ADD COLUMN cancel_requested_by TEXT;
ALTER TABLE scoring_runs ADD COLUMN owner TEXT;
ALTER TABLE scoring_runs ADD COLUMN lease_until INTEGER;
CREATE INDEX scoring_runs_by_survey ON scoring_runs (survey_id, created_at);

