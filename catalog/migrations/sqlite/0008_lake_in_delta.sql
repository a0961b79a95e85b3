-- The lake's tables became Delta Lake tables (issue 22): their logs list the live files and
-- hold each instance's flushed log position, and the vacuum deletes files no commit names.
-- A lake written before this needs a fresh start (docs/lake.md).
DROP TABLE lake_unlinked_objects;
DROP TABLE lake_files;
DELETE FROM wal_watermarks WHERE consumer = 'lake';
