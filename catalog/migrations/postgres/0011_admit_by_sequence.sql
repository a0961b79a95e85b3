-- The integration API's per-key limit at a cost that does not grow with the limit.
--
-- 0003's function counted the key's rows of the last window on every request: with a limit
-- raised to thousands a minute, each admission read thousands of index entries (0.29 ms a call
-- with 2,000 rows in the window, 0.55 ms with 4,000; pgbench, one client). Each accepted request
-- now carries the next number of its key, and a key's count in the window is the newest number
-- less the oldest kept plus one: two index probes whatever the count.
--
-- Rows leave only from the old end (by `accepted_at`), so the kept numbers stay contiguous. If
-- the database's clock stepped back, a later row could leave before an earlier one; the count
-- can then be too high by the rows that left out of order (a request refused early, never one
-- let through beyond the limit).
ALTER TABLE api_requests ADD COLUMN seq BIGINT;
UPDATE api_requests r SET seq = numbered.seq
    FROM (SELECT ctid, row_number() OVER (PARTITION BY key_prefix ORDER BY accepted_at) AS seq
          FROM api_requests) numbered
    WHERE r.ctid = numbered.ctid;
ALTER TABLE api_requests ALTER COLUMN seq SET NOT NULL;
CREATE UNIQUE INDEX api_requests_by_seq ON api_requests (key_prefix, seq);

CREATE OR REPLACE FUNCTION telltale_admit_api_request(p_key TEXT, p_limit INTEGER, p_window_ms BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    -- The database's clock: every instance counts by the same one.
    now_ms    BIGINT := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    newest    BIGINT;
    first_seq BIGINT;
    oldest    BIGINT;
BEGIN
    -- A lost count only lets one request more through after a database crash: not worth a
    -- disk flush per API request.
    PERFORM set_config('synchronous_commit', 'off', true);
    -- One key's requests are counted one at a time, on every instance (class 2: API keys).
    PERFORM pg_advisory_xact_lock(2, hashtext(p_key));
    DELETE FROM api_requests WHERE key_prefix = p_key AND accepted_at <= now_ms - p_window_ms;
    SELECT seq INTO newest FROM api_requests WHERE key_prefix = p_key ORDER BY seq DESC LIMIT 1;
    SELECT seq, accepted_at INTO first_seq, oldest
        FROM api_requests WHERE key_prefix = p_key ORDER BY seq LIMIT 1;
    IF newest IS NULL OR newest - first_seq + 1 < p_limit THEN
        INSERT INTO api_requests (key_prefix, accepted_at, seq)
            VALUES (p_key, now_ms, coalesce(newest, 0) + 1);
        RETURN NULL;
    END IF;
    RETURN greatest(oldest + p_window_ms - now_ms, 1);
END
$$;
