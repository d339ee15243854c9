//! The SQL of the SQLite stores `do` and `d1`: one `(key, value, expires_at)` table where an
//! expired row is a miss, deleted by the object's alarm or, in D1, by later writes (the
//! migrations create the same table, a test keeps them equal). [`kept`]: the kept answers' table.

/// The table; `WITHOUT ROWID` makes a write bill 1 row, not 2 (workerd's SQLite counters).
pub const CREATE: &str = "CREATE TABLE IF NOT EXISTS kvbench (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID";

/// The read: `?1` the key, `?2` now in epoch ms. An expired row is no row.
pub const SELECT: &str = "SELECT value FROM kvbench WHERE key = ?1 AND expires_at > ?2";

/// The write: `?1` the key, `?2` the value, `?3` its expiry in epoch ms.
pub const UPSERT: &str =
    "INSERT OR REPLACE INTO kvbench (key, value, expires_at) VALUES (?1, ?2, ?3)";

/// Cleanup (the Durable Object's alarm): `?1` now in epoch ms.
pub const DELETE_EXPIRED: &str = "DELETE FROM kvbench WHERE expires_at <= ?1";

/// D1's index on the expiry (its second migration), so a write finds the oldest expired rows
/// without a scan. Each write then bills 2 rows written (the row and its index entry).
pub const EXPIRY_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS kvbench_expires_at ON kvbench (expires_at)";

/// Expired rows a D1 write deletes at most: a write adds one row, so 16 keeps them from piling
/// up and bounds a write's cost.
pub const EXPIRED_PER_WRITE: u32 = 16;

/// Run with each [`UPSERT`] in D1's batch: deletes up to [`EXPIRED_PER_WRITE`] expired rows of
/// other keys through [`EXPIRY_INDEX`]. `?1` now in epoch ms, `?2` the key written.
pub const DELETE_EXPIRED_OTHERS: &str = "DELETE FROM kvbench WHERE key IN (SELECT key FROM kvbench WHERE expires_at <= ?1 AND key <> ?2 ORDER BY expires_at LIMIT 16)";

/// When the next row expires (`NULL` when the table is empty), and how many rows there are.
pub const NEXT_EXPIRY: &str = "SELECT MIN(expires_at) AS next, COUNT(*) AS rows FROM kvbench";

/// Whether the table exists, without creating it (a read must never write): `n` is 0 or 1.
pub const TABLE_EXISTS: &str =
    "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'kvbench'";

/// Whether a SQLite error says the table is not there: what a read of a new (or emptied)
/// Durable Object meets, a miss rather than a failure.
pub fn is_no_table(error_text: &str) -> bool {
    error_text.contains("no such table")
}

/// The absolute expiry of a value written at `now_ms` with `ttl_s`, epoch ms.
pub fn expires_at_ms(now_ms: f64, ttl_s: u32) -> i64 {
    now_ms.floor() as i64 + i64::from(ttl_s) * 1000
}

/// D1's Sessions API constraint for the request's queries (`d1_session=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum D1Session {
    /// The first query may be answered by any replica.
    FirstUnconstrained,
    /// The first query goes to the primary.
    FirstPrimary,
}

impl D1Session {
    pub fn as_str(self) -> &'static str {
        match self {
            D1Session::FirstUnconstrained => "first-unconstrained",
            D1Session::FirstPrimary => "first-primary",
        }
    }

    pub fn parse(name: &str) -> Option<D1Session> {
        [D1Session::FirstUnconstrained, D1Session::FirstPrimary]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// The SQL of a probe or run object's kept answers (its own SQLite database), tested natively
/// against a real SQLite (`tests/tests/kept_sql.rs`).
pub mod kept {
    /// One row per kept line; `seq` numbers them in the order they were kept.
    pub const CREATE: &str = "CREATE TABLE IF NOT EXISTS kept (seq INTEGER PRIMARY KEY, t_ms INTEGER NOT NULL, line TEXT NOT NULL)";
    /// Several lines in one statement (so all or none are kept): `?1` a JSON array of
    /// `[t_ms, line]`, numbered in array order after the last `seq` (the subquery is not
    /// correlated: SQLite reads it once).
    pub const INSERT_MANY: &str = "INSERT INTO kept (seq, t_ms, line) SELECT (SELECT MAX(COALESCE((SELECT MAX(seq) FROM kept), 0), COALESCE((SELECT seq FROM seq_floor WHERE id = 1), 0))) + j.key + 1, json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]') FROM json_each(?1) AS j";
    /// The highest `seq` ever deleted, so `seq` never repeats once every row expired (an
    /// `INTEGER PRIMARY KEY` alone would start again at 1; objects made before kept their table).
    pub const CREATE_FLOOR: &str =
        "CREATE TABLE IF NOT EXISTS seq_floor (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL)";
    pub const INSERT: &str = "INSERT INTO kept (seq, t_ms, line) VALUES (MAX(COALESCE((SELECT MAX(seq) FROM kept), 0), COALESCE((SELECT seq FROM seq_floor WHERE id = 1), 0)) + 1, ?1, ?2)";
    /// Before a delete that takes every row (all older than `?1`): the floor rises to the highest
    /// `seq` there is (one row written then, none otherwise). The `NOT EXISTS` walks `seq` from
    /// the oldest row and stops at the first one kept, as `DELETE_OLD` does.
    pub const RAISE_FLOOR: &str = "INSERT INTO seq_floor (id, seq) SELECT 1, MAX(seq) FROM kept WHERE NOT EXISTS (SELECT 1 FROM kept WHERE t_ms >= ?1) HAVING MAX(seq) IS NOT NULL ON CONFLICT (id) DO UPDATE SET seq = MAX(seq, excluded.seq)";
    /// The oldest answer's time, by `seq` (no scan of the table).
    pub const FIRST: &str = "SELECT t_ms AS first FROM kept ORDER BY seq LIMIT 1";
    /// A page of the lines after `seq` `?1` with `?2 <= t_ms < ?3`, at most `?4`.
    pub const PAGE: &str =
        "SELECT seq, line FROM kept WHERE seq > ?1 AND t_ms >= ?2 AND t_ms < ?3 ORDER BY seq LIMIT ?4";
    /// Deletes answers older than `?1`. Answers are kept in time order (`seq` follows `t_ms`), so the
    /// subquery walks `seq` up to the first answer to keep and stops: the expired rows plus one are
    /// read, not the whole table; when everything expired, everything goes.
    pub const DELETE_OLD: &str = "DELETE FROM kept WHERE seq < COALESCE((SELECT seq FROM kept WHERE t_ms >= ?1 ORDER BY seq LIMIT 1), (SELECT MAX(seq) + 1 FROM kept))";
    pub const COUNT: &str = "SELECT COUNT(*) AS n, MIN(t_ms) AS first, MAX(t_ms) AS last FROM kept";
    /// Keeps that failed: answers that never reached a table (a run's, counted by the worker
    /// that sent them and recorded in a shard that answered; a probe's own failed write).
    pub const CREATE_FAILED: &str =
        "CREATE TABLE IF NOT EXISTS keep_failed (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)";
    /// Adds `?1` failed keeps.
    pub const ADD_FAILED: &str = "INSERT INTO keep_failed (id, n) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET n = n + excluded.n";
    /// The failed keeps recorded (no row: none).
    pub const FAILED: &str = "SELECT n FROM keep_failed WHERE id = 1";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// D1's migrations create exactly the table the Durable Object creates, then the expiry
    /// index its writes delete through.
    #[test]
    fn the_d1_migrations_create_the_same_table_and_the_expiry_index() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("migrations/")
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        let statements = |file: &std::path::Path| -> Vec<String> {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join(" ")
                .split(';')
                .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|s| !s.is_empty())
                .collect()
        };
        let all: Vec<Vec<String>> = files.iter().map(|f| statements(f)).collect();
        assert_eq!(all, [vec![CREATE], vec![EXPIRY_INDEX]], "{files:?}");
    }

    #[test]
    fn the_write_deletes_as_many_expired_rows_as_it_says() {
        assert!(DELETE_EXPIRED_OTHERS.ends_with(&format!("LIMIT {EXPIRED_PER_WRITE})")));
        assert!(
            DELETE_EXPIRED_OTHERS.contains("key <> ?2"),
            "never the key being written"
        );
    }

    #[test]
    fn sessions_and_expiry() {
        assert_eq!(
            D1Session::parse("first-primary"),
            Some(D1Session::FirstPrimary)
        );
        assert_eq!(D1Session::parse("bookmark"), None);
        assert_eq!(expires_at_ms(1000.9, 60), 61_000);
    }
}
