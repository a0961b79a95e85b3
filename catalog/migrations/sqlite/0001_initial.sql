-- Telltale catalog, SQLite backend. Times are Unix milliseconds (INTEGER); identifiers are text.

CREATE TABLE organizations (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    -- An organization is deleted softly: its keys must still be recognised so that context can
    -- answer 404 ("the organization that owns the key no longer exists") instead of 401.
    deleted_at  INTEGER
);

CREATE TABLE integration_keys (
    prefix          TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    -- SHA-256 of the full secret, hex. The secret itself is never stored.
    secret_sha256   TEXT NOT NULL,
    label           TEXT NOT NULL,
    scopes          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    revoked_at      INTEGER
);
CREATE INDEX integration_keys_by_organization ON integration_keys (organization_id);

CREATE TABLE surveys (
    id                 TEXT PRIMARY KEY,
    organization_id    TEXT NOT NULL REFERENCES organizations (id),
    external_survey_id TEXT NOT NULL,
    name               TEXT NOT NULL,
    tracking_key       TEXT NOT NULL UNIQUE,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    UNIQUE (organization_id, external_survey_id)
);

-- One row per browser-session identifier; a lookup reference aggregates every identifier linked
-- to it.
CREATE TABLE sessions (
    survey_id      TEXT NOT NULL REFERENCES surveys (id),
    identifier     TEXT NOT NULL,
    reference      TEXT,
    -- 1 when the reference came from the embed's interviewId; 0 when it defaulted to the
    -- identifier (a UUID). An explicit reference is never replaced by a default one.
    reference_explicit INTEGER NOT NULL DEFAULT 0,
    event_count    INTEGER NOT NULL,
    first_event_at INTEGER,
    last_event_at  INTEGER,
    PRIMARY KEY (survey_id, identifier)
) WITHOUT ROWID;
CREATE INDEX sessions_by_reference ON sessions (survey_id, reference);

-- How far each consumer of an instance's write-ahead log has durably got. Records at or below
-- the watermark are never applied again, which makes replay after a crash exactly-once.
CREATE TABLE wal_watermarks (
    instance_id TEXT NOT NULL,
    consumer    TEXT NOT NULL,
    lsn         INTEGER NOT NULL,
    PRIMARY KEY (instance_id, consumer)
) WITHOUT ROWID;

-- The lake's live files. A Parquet object is visible to readers only once its row is here.
CREATE TABLE lake_files (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    path           TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL CHECK (kind IN ('events', 'features', 'scores')),
    survey_id      TEXT NOT NULL,
    partition_date TEXT,
    row_count      INTEGER NOT NULL,
    size_bytes     INTEGER NOT NULL,
    min_session    TEXT,
    max_session    TEXT,
    created_at     INTEGER NOT NULL
);
CREATE INDEX lake_files_by_survey ON lake_files (kind, survey_id, partition_date);

-- Latest score of each session (reference), read by lookup.
CREATE TABLE session_scores (
    survey_id           TEXT NOT NULL,
    reference           TEXT NOT NULL,
    human_score_percent REAL NOT NULL,
    score_band          TEXT NOT NULL,
    scored_at           INTEGER NOT NULL,
    model_version       TEXT NOT NULL,
    run_id              TEXT NOT NULL,
    PRIMARY KEY (survey_id, reference)
) WITHOUT ROWID;

CREATE TABLE scoring_runs (
    id                  TEXT PRIMARY KEY,
    survey_id           TEXT NOT NULL REFERENCES surveys (id),
    force               INTEGER NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'canceled')),
    total               INTEGER NOT NULL DEFAULT 0,
    scored              INTEGER NOT NULL DEFAULT 0,
    skipped             INTEGER NOT NULL DEFAULT 0,
    failed              INTEGER NOT NULL DEFAULT 0,
    failures            TEXT NOT NULL DEFAULT '[]',
    error               TEXT,
    created_at          INTEGER NOT NULL,
    started_at          INTEGER NOT NULL,
    completed_at        INTEGER,
    updated_at          INTEGER,
    cancel_requested_at INTEGER,
    canceled_at         INTEGER,
    canceled_by         TEXT
);
-- At most one active run per survey, enforced here rather than by callers.
CREATE UNIQUE INDEX scoring_runs_one_active ON scoring_runs (survey_id) WHERE status = 'running';

CREATE TABLE session_deletions (
    survey_id    TEXT NOT NULL REFERENCES surveys (id),
    reference    TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    requested_at INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    completed_at INTEGER,
    error        TEXT,
    PRIMARY KEY (survey_id, reference)
) WITHOUT ROWID;

-- Never removed. `id` orders them so instances can poll for new ones cheaply.
CREATE TABLE tombstones (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    survey_id  TEXT NOT NULL,
    reference  TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (survey_id, reference)
);
