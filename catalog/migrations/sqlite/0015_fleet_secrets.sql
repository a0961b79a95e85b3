-- Secrets every instance of a deployment must share (issue 70): the key that signs review and
-- desk links, so that a link made on one instance opens on every other. Made once, by whichever
-- instance first needs it (or taken over from the data dir's `review-secret` file an earlier
-- release kept), unless the operator gives one (`--review-secret`). A backup of the catalog
-- holds it: whoever reads one can sign links until it is rotated (docs/review.md).
CREATE TABLE fleet_secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
