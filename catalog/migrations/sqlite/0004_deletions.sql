-- Session deletion: worker leases and retry times, tombstoned identifiers, and the lake's
-- objects that exist without being live (rewrites in flight and files they replaced).

ALTER TABLE session_deletions ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_deletions ADD COLUMN owner TEXT;
ALTER TABLE session_deletions ADD COLUMN lease_until INTEGER;
CREATE INDEX session_deletions_pending ON session_deletions (next_attempt_at)
    WHERE status = 'pending';

-- Browser-session identifiers that were linked to a deleted reference, so that later batches
-- sent under them are discarded after the sessions rows that linked them are gone. Only a
-- SHA-256 of `survey_id:identifier` is kept: the catalog holds no identifier of an erased
-- session. Part of the tombstone; never removed.
CREATE TABLE tombstoned_identifiers (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    survey_id         TEXT NOT NULL,
    identifier_sha256 TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    UNIQUE (survey_id, identifier_sha256)
);

-- Objects that may exist in the lake without being live. `owner` set: an upload of a rewrite
-- (erasure or compaction) by that instance, not yet committed; owner NULL: a file a committed
-- rewrite replaced, to be deleted. Whoever deletes the object deletes the row.
CREATE TABLE lake_unlinked_objects (
    path       TEXT PRIMARY KEY,
    owner      TEXT,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
