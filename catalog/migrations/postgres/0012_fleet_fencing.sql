-- A fleet that cannot lose an erasure or score half a session (issue 70).
--
-- Fencing. Each time an instance joins the fleet (at start, and after it learns it was fenced)
-- it takes a new `epoch`. An erasure that would otherwise wait for an instance not seen within
-- its lease (judged by the catalog's clock) fences that epoch (`fenced_epoch`), then commits a
-- fence to the lake's `events` table (`lake_fenced_epoch` once it has): every catalog write and
-- lake commit of a flush carries its epoch, and one of a fenced epoch is refused. An instance
-- that stopped cleanly fences itself. `purge_error` is why its last purge failed (NULL when it
-- succeeded), shown on the deletions that wait for it.
ALTER TABLE instances ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN fenced_epoch BIGINT NOT NULL DEFAULT -1;
ALTER TABLE instances ADD COLUMN lake_fenced_epoch BIGINT NOT NULL DEFAULT -1;
ALTER TABLE instances ADD COLUMN purge_error TEXT;

-- The fleet's flush horizon: a run asks every live instance to flush (`flush_wanted`, a time
-- of the catalog's clock) and waits, bounded, until each has made everything it acknowledged
-- before then visible (`flushed_for`).
ALTER TABLE instances ADD COLUMN flush_wanted BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN flushed_for BIGINT NOT NULL DEFAULT 0;

-- Why a pending deletion waits, and on what (an instance, a run), as its last attempt saw it.
ALTER TABLE session_deletions ADD COLUMN waiting_on TEXT;
ALTER TABLE session_deletions ADD COLUMN wait_reason TEXT;

-- The events a reference's latest score was computed from: a run that is not forced scores
-- again a reference whose acknowledged events grew past them. Scores recorded before this
-- migration count as computed from what the statistics held then.
ALTER TABLE reference_summaries ADD COLUMN scored_events BIGINT;
UPDATE reference_summaries SET scored_events = event_count WHERE scored_at IS NOT NULL;

-- A run's plan reads the references due for scoring: no score, or events that grew since it.
CREATE INDEX reference_summaries_due ON reference_summaries (survey_id)
    WHERE sessions > 0 AND (scored_at IS NULL OR event_count > scored_events);

-- Sessions a run left for a later one (their events not all in the lake yet), and why; and
-- how often a run paused on a store that answered its probes (a read that always times out).
ALTER TABLE scoring_runs ADD COLUMN deferred BIGINT NOT NULL DEFAULT 0;
ALTER TABLE scoring_runs ADD COLUMN deferred_reason TEXT;
ALTER TABLE scoring_runs ADD COLUMN pauses BIGINT NOT NULL DEFAULT 0;
