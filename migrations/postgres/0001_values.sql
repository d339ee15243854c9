-- The table of the postgres and hyperdrive stores (kvbench_core::postgres): one row per key,
-- the value's exact bytes, and when it expires. Reads skip expired rows (expires_at > clock_timestamp());
-- each write deletes a few expired rows through the index, so nothing ever scans the table.
-- Applied once, by npm run deploy (against POSTGRES_URL) and by the local stack.
CREATE TABLE IF NOT EXISTS kvbench_values (
    k text PRIMARY KEY,
    v bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS kvbench_values_expires_at ON kvbench_values (expires_at);
