-- The integration API's rolling-minute limit counted in the catalog: one row per accepted
-- request, kept for a minute. The server counts in process on this backend (one machine);
-- the table keeps the two backends' schemas and conformance suite alike.
CREATE TABLE api_requests (
    key_prefix  TEXT NOT NULL,
    accepted_at INTEGER NOT NULL
);
CREATE INDEX api_requests_by_key ON api_requests (key_prefix, accepted_at);
