-- The `d1` store's table (crates/core/src/stores/sql.rs CREATE; a test keeps the two equal). An expired
-- row is a miss, overwritten by the next write of its key or deleted by a write of another
-- (0002_expiry_index.sql). WITHOUT ROWID: one row written
-- per write instead of two (a rowid table plus its primary-key index).
CREATE TABLE IF NOT EXISTS kvbench (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
