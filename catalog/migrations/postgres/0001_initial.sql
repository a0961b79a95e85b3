-- Telltale catalog, PostgreSQL backend: the schema of the SQLite migrations 0001-0004 in one
-- step. Times are Unix milliseconds (BIGINT); identifiers are text. The two backends keep the
-- same tables, columns and constraints so that one conformance suite holds for both.

CREATE TABLE organizations (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    -- Soft delete: the organization's keys must still be recognised (context answers 404).
    deleted_at  BIGINT
);

CREATE TABLE integration_keys (
    prefix          TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    -- SHA-256 of the full secret, hex. The secret itself is never stored.
    secret_sha256   TEXT NOT NULL,
    label           TEXT NOT NULL,
    scopes          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    revoked_at      BIGINT
);
CREATE INDEX integration_keys_by_organization ON integration_keys (organization_id);

-- The integration API's rolling-minute limit, shared by every instance: one row per accepted
-- request, kept for a minute (see `PgCatalog::admit_api_request`).
CREATE TABLE api_requests (
    key_prefix  TEXT NOT NULL,
    accepted_at BIGINT NOT NULL
);
CREATE INDEX api_requests_by_key ON api_requests (key_prefix, accepted_at);

CREATE TABLE surveys (
    id                 TEXT PRIMARY KEY,
    organization_id    TEXT NOT NULL REFERENCES organizations (id),
    external_survey_id TEXT NOT NULL,
    name               TEXT NOT NULL,
    tracking_key       TEXT NOT NULL UNIQUE,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    UNIQUE (organization_id, external_survey_id)
);

-- One row per browser-session identifier; a lookup reference aggregates every identifier linked
-- to it. An explicit reference (the embed's interviewId) is never replaced by a default one.
CREATE TABLE sessions (
    survey_id          TEXT NOT NULL REFERENCES surveys (id),
    identifier         TEXT NOT NULL,
    reference          TEXT,
    reference_explicit BOOLEAN NOT NULL DEFAULT FALSE,
    event_count        BIGINT NOT NULL,
    first_event_at     BIGINT,
    last_event_at      BIGINT,
    PRIMARY KEY (survey_id, identifier)
);
-- Covering: lookup reads a reference's statistics from the index alone.
CREATE INDEX sessions_by_reference
    ON sessions (survey_id, reference) INCLUDE (event_count, first_event_at, last_event_at);

-- How far each consumer of an instance's write-ahead log has durably got (exactly-once replay).
CREATE TABLE wal_watermarks (
    instance_id TEXT NOT NULL,
    consumer    TEXT NOT NULL,
    lsn         BIGINT NOT NULL,
    PRIMARY KEY (instance_id, consumer)
);

-- The lake's live files. A Parquet object is visible to readers only once its row is here.
CREATE TABLE lake_files (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    path           TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL CHECK (kind IN ('events', 'features', 'scores')),
    survey_id      TEXT NOT NULL,
    partition_date TEXT,
    row_count      BIGINT NOT NULL,
    size_bytes     BIGINT NOT NULL,
    min_session    TEXT,
    max_session    TEXT,
    created_at     BIGINT NOT NULL
);
CREATE INDEX lake_files_by_survey ON lake_files (kind, survey_id, partition_date);

-- Latest score of each session (reference), read by lookup.
CREATE TABLE session_scores (
    survey_id           TEXT NOT NULL,
    reference           TEXT NOT NULL,
    human_score_percent DOUBLE PRECISION NOT NULL,
    score_band          TEXT NOT NULL,
    scored_at           BIGINT NOT NULL,
    model_version       TEXT NOT NULL,
    run_id              TEXT NOT NULL,
    PRIMARY KEY (survey_id, reference)
);

-- A worker (a server instance, or `telltale score`) owns a running run through a lease it renews
-- with every progress update; every write of the worker names the owner (a fence).
CREATE TABLE scoring_runs (
    id                  TEXT PRIMARY KEY,
    survey_id           TEXT NOT NULL REFERENCES surveys (id),
    force               BOOLEAN NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'canceled')),
    total               BIGINT NOT NULL DEFAULT 0,
    scored              BIGINT NOT NULL DEFAULT 0,
    skipped             BIGINT NOT NULL DEFAULT 0,
    failed              BIGINT NOT NULL DEFAULT 0,
    failures            TEXT NOT NULL DEFAULT '[]',
    error               TEXT,
    created_at          BIGINT NOT NULL,
    started_at          BIGINT NOT NULL,
    completed_at        BIGINT,
    updated_at          BIGINT,
    cancel_requested_at BIGINT,
    cancel_requested_by TEXT,
    canceled_at         BIGINT,
    canceled_by         TEXT,
    owner               TEXT,
    lease_until         BIGINT
);
-- At most one active run per survey, across every instance, enforced here.
CREATE UNIQUE INDEX scoring_runs_one_active ON scoring_runs (survey_id) WHERE status = 'running';
CREATE INDEX scoring_runs_by_survey ON scoring_runs (survey_id, created_at);

CREATE TABLE session_deletions (
    survey_id       TEXT NOT NULL REFERENCES surveys (id),
    reference       TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    requested_at    BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    completed_at    BIGINT,
    error           TEXT,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    owner           TEXT,
    lease_until     BIGINT,
    PRIMARY KEY (survey_id, reference)
);
CREATE INDEX session_deletions_pending ON session_deletions (next_attempt_at)
    WHERE status = 'pending';

-- Never removed. Instances poll for rows with an `id` above the last they saw, so ids must
-- become visible in order: inserts take a transaction-level advisory lock (see postgres.rs).
CREATE TABLE tombstones (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    survey_id  TEXT NOT NULL,
    reference  TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (survey_id, reference)
);

-- Identifiers once linked to a deleted reference, as SHA-256 of `survey_id:identifier` only.
CREATE TABLE tombstoned_identifiers (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    survey_id         TEXT NOT NULL,
    identifier_sha256 TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    UNIQUE (survey_id, identifier_sha256)
);

-- Objects that may exist in the lake without being live: uploads of uncommitted rewrites
-- (`owner` set) and files a committed rewrite replaced (`owner` NULL).
CREATE TABLE lake_unlinked_objects (
    path       TEXT PRIMARY KEY,
    owner      TEXT,
    created_at BIGINT NOT NULL
);
