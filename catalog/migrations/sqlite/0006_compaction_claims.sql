-- Which instance compacts a partition (a survey's events files of one date) right now, so that
-- instances sharing a catalog split compaction work instead of racing for the same files. A
-- claim is a lease: a dead instance's claim lapses. `partition_date` is '' for files without one.
CREATE TABLE compaction_claims (
    survey_id      TEXT NOT NULL,
    partition_date TEXT NOT NULL,
    owner          TEXT,
    lease_until    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (survey_id, partition_date)
) WITHOUT ROWID;
