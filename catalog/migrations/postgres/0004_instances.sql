-- Every serving instance, as it last reported itself. An erasure completes only once every
-- instance seen within its lease has purged its write-ahead log after loading the erased
-- session's tombstone: `purged_through` is the highest tombstone id loaded before the
-- instance's last completed purge. No reference or identifier is kept here.
CREATE TABLE instances (
    instance_id    TEXT PRIMARY KEY,
    seen_at        BIGINT NOT NULL,
    purged_through BIGINT NOT NULL DEFAULT 0
);
