-- The integration API's per-key limit in one round trip instead of a transaction of seven
-- statements sent one by one (lock, clock, prune, count, insert). benches/scale_out showed no
-- lookup latency gain beyond its noise, but each API request now holds a pooled connection for
-- one round trip. Returns NULL when the request is accepted (and counted), otherwise the
-- milliseconds until one would be.
CREATE FUNCTION telltale_admit_api_request(p_key TEXT, p_limit INTEGER, p_window_ms BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    -- The database's clock: every instance counts by the same one.
    now_ms   BIGINT := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    accepted BIGINT;
    oldest   BIGINT;
BEGIN
    -- A lost count only lets one request more through after a database crash: not worth a
    -- disk flush per API request.
    PERFORM set_config('synchronous_commit', 'off', true);
    -- One key's requests are counted one at a time, on every instance (class 2: API keys).
    PERFORM pg_advisory_xact_lock(2, hashtext(p_key));
    DELETE FROM api_requests WHERE key_prefix = p_key AND accepted_at <= now_ms - p_window_ms;
    SELECT count(*), min(accepted_at) INTO accepted, oldest
        FROM api_requests WHERE key_prefix = p_key;
    IF accepted < p_limit THEN
        INSERT INTO api_requests (key_prefix, accepted_at) VALUES (p_key, now_ms);
        RETURN NULL;
    END IF;
    RETURN greatest(oldest + p_window_ms - now_ms, 1);
END
$$;
