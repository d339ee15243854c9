-- The `d1` store's index on the expiry (crates/core/src/stores/sql.rs EXPIRY_INDEX; a test keeps the two
-- equal). D1 has no TTL: each write also deletes up to 16 expired rows of other keys, found
-- through this index without a scan, so the table never holds more than what the last TTL wrote
-- and 16 rows. It makes each write 2 rows written (the row and its index entry).
CREATE INDEX IF NOT EXISTS kvbench_expires_at ON kvbench (expires_at);
