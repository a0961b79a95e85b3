-- Values every instance of a deployment shares, each made once by whichever instance first needs
-- it (issue 70):
--
-- - `review-links`: the key that signs review and desk links, so that a link made on one
--   instance opens on every other (unless the operator gives one, `--review-secret`; a
--   catalog an earlier release ran on takes over that release's data-dir `review-secret`
--   file). A backup of the catalog holds it: whoever reads one can sign links until it is
--   rotated (docs/review.md).
-- - `catalog-identity`: names this catalog, so that a restore can tell the catalog its backup
--   was taken from (`--tombstones-from`) from any other. A restored catalog gets a new one.
CREATE TABLE fleet_values (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- The epoch an instance last left the fleet at, cleanly, its log flushed (`telltale drain`, or
-- a stop whose final flush succeeded): a backup without a log asks it of every instance that is
-- not running.
ALTER TABLE instances ADD COLUMN left_epoch INTEGER NOT NULL DEFAULT -1;
