//! The `postgres` store's client (`kvbench_core::stores::postgres`) against a real PostgreSQL server,
//! started by `scripts/postgres.sh` (what the local stack uses) on a free loopback port with
//! SCRAM password authentication and the migration applied, over plain blocking TCP: miss,
//! write, hit at exact sizes (checked by the server's own md5 of the bytes), expiry, the
//! server's errors by kind; and servers that are not Postgres or break it, each a clear error.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use futures::executor::block_on;
use kvbench_core::stores::store::Options;
use kvbench_core::{ErrorKind, PgUrl, PostgresStore, Store, Value};
use kvbench_tests::{free_port, read, write, Tcp};

const PASSWORD: &str = "native-postgres-password-7f2e";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh")
}

/// A running server, stopped (by PID) and removed on drop.
struct Server {
    dir: PathBuf,
    url: String,
    port: u16,
}

impl Server {
    fn start() -> Server {
        let dir = std::env::temp_dir().join(format!("kvbench-pg-test-{}", std::process::id()));
        let port = free_port();
        let out = Command::new("bash")
            .arg(script())
            .args(["start", dir.to_str().unwrap(), &port.to_string(), PASSWORD])
            .output()
            .expect("bash runs scripts/postgres.sh");
        assert!(
            out.status.success(),
            "scripts/postgres.sh start failed (bash scripts/setup.sh installs PostgreSQL): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Server { dir, url, port }
    }

    fn url(&self, password: &str, database: &str) -> PgUrl {
        let url = format!(
            "postgres://kvbench:{password}@127.0.0.1:{}/{database}",
            self.port
        );
        PgUrl::parse(&url, "POSTGRES_URL").unwrap()
    }

    /// One query through psql (another client), its unaligned output.
    fn psql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                &self.url,
                "-c",
                sql,
            ])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["stop", self.dir.to_str().unwrap()])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn store(url: PgUrl) -> PostgresStore<Tcp> {
    PostgresStore::new(
        url,
        Tcp,
        "Postgres",
        kvbench_core::stores::scram::nfkc_tables,
    )
}

/// A value of `n` bytes with every byte value in it (bytea carries them all).
fn value(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn md5_hex(bytes: &[u8]) -> String {
    let out = Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .expect("md5sum runs");
    String::from_utf8(out.stdout).unwrap()[..32].to_string()
}

#[test]
fn against_a_real_server() {
    let server = Server::start();
    miss_write_hit_at_exact_sizes(&server);
    expired_rows_are_never_read_and_writes_delete_them(&server);
    the_servers_refusals_are_errors_by_kind(&server);
    the_read_is_of_the_kind_hyperdrive_never_caches(&server);
}

/// The functions a statement calls: every name written right before a `(`.
fn functions_called(sql: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut word = String::new();
    for c in sql.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if c == '(' && !word.is_empty() && !word.starts_with(|d: char| d.is_ascii_digit()) {
            names.push(word.to_ascii_lowercase());
        }
        word.clear();
    }
    names
}

/// Hyperdrive caches a read unless it calls a function PostgreSQL marks volatile (every
/// version of its docs) or stable (2026-07): the read must call a volatile one, and the
/// server itself says which kind each function is (`pg_proc.provolatile`: `v`, `s`, `i`).
fn the_read_is_of_the_kind_hyperdrive_never_caches(server: &Server) {
    use kvbench_core::stores::postgres::READ_SQL;
    assert!(READ_SQL.trim_start().starts_with("SELECT"), "{READ_SQL}");
    let called = functions_called(READ_SQL);
    assert!(!called.is_empty(), "the read calls no function: {READ_SQL}");
    let list = called
        .iter()
        .map(|f| format!("'{f}'"))
        .collect::<Vec<_>>()
        .join(",");
    let kinds = server.psql(&format!(
        "SELECT proname::text || ':' || provolatile::text FROM pg_proc WHERE proname IN ({list}) \
         ORDER BY 1"
    ));
    let volatile: Vec<&str> = kinds.lines().filter_map(|l| l.strip_suffix(":v")).collect();
    assert!(
        !volatile.is_empty(),
        "the read ({READ_SQL}) calls no volatile function, so Hyperdrive may answer it from \
         its cache: {kinds}"
    );
    // The scan of names finds what a reader sees: `now()` alone was a stable function.
    assert_eq!(functions_called("SELECT now(), f (1), 2(x)"), ["now"]);
}

fn miss_write_hit_at_exact_sizes(server: &Server) {
    let s = store(server.url(PASSWORD, "kvbench"));
    assert_eq!(block_on(s.connect()), Ok(true), "connect + SCRAM");
    assert_eq!(
        block_on(s.connect()),
        Ok(false),
        "one connection per request"
    );
    for (i, n) in [1usize, 4096, 65_536, 1_048_576].into_iter().enumerate() {
        let key = format!("kvbench:postgres:size-{n}");
        assert_eq!(
            block_on(read(&s, &key, Options::default())),
            Ok(None),
            "{n}: a miss"
        );
        let bytes = value(n, i as u8);
        assert_eq!(
            block_on(write(&s, &key, &bytes, 90)),
            Ok(()),
            "{n}: the write"
        );
        assert_eq!(
            block_on(read(&s, &key, Options::default())),
            Ok(Some(n as u64)),
            "{n}: a hit, whole"
        );
        // The server holds exactly these bytes, expiring in 90 s (not ms, not minutes).
        let row = server.psql(&format!(
            "SELECT octet_length(v), md5(v), round(extract(epoch FROM expires_at - now())) \
             FROM kvbench_values WHERE k = '{key}'"
        ));
        let fields: Vec<&str> = row.split('|').collect();
        assert_eq!(fields[0], n.to_string(), "{n}: stored length");
        assert_eq!(fields[1], md5_hex(&bytes), "{n}: stored bytes");
        let ttl: f64 = fields[2].parse().unwrap();
        assert!((85.0..=90.0).contains(&ttl), "{n}: expires in {ttl} s");
    }
    // Writing again replaces the row (the upsert), with the new bytes.
    let key = "kvbench:postgres:size-1";
    assert_eq!(block_on(write(&s, key, b"xyz", 60)), Ok(()));
    assert_eq!(block_on(read(&s, key, Options::default())), Ok(Some(3)));
    block_on(s.close());
}

fn expired_rows_are_never_read_and_writes_delete_them(server: &Server) {
    // Rows another client made, expired a second ago: a read never returns them.
    server.psql(
        "INSERT INTO kvbench_values SELECT 'kvbench:postgres:old-' || i, 'x', now() - interval '1 s' \
         FROM generate_series(1, 40) i",
    );
    let s = store(server.url(PASSWORD, "kvbench"));
    block_on(s.connect()).unwrap();
    assert_eq!(
        block_on(read(&s, "kvbench:postgres:old-1", Options::default())),
        Ok(None),
        "an expired row is a miss"
    );
    let expired = || server.psql("SELECT count(*) FROM kvbench_values WHERE expires_at <= now()");
    assert_eq!(expired(), "40");
    // Each write deletes up to 16 expired rows (through the index), and never its own key's.
    assert_eq!(
        block_on(write(&s, "kvbench:postgres:old-1", b"new", 60)),
        Ok(())
    );
    assert_eq!(
        expired(),
        "23",
        "16 deleted, and the written key's row no longer expired"
    );
    assert_eq!(
        block_on(read(&s, "kvbench:postgres:old-1", Options::default())),
        Ok(Some(3))
    );
    block_on(write(&s, "kvbench:postgres:a", b"a", 60)).unwrap();
    block_on(write(&s, "kvbench:postgres:b", b"b", 60)).unwrap();
    assert_eq!(expired(), "0");
    // The plan of the read and of the delete's search uses an index, never a scan of the table.
    for sql in [
        "EXPLAIN SELECT v FROM kvbench_values WHERE k = 'x' AND expires_at > now()",
        "EXPLAIN SELECT k FROM kvbench_values WHERE expires_at <= now() ORDER BY expires_at LIMIT 16",
    ] {
        let plan = server.psql(&format!("SET enable_seqscan = off; {sql}"));
        assert!(!plan.contains("Seq Scan"), "{sql}: {plan}");
    }
    // A row written with a 1 s TTL is gone for reads a little later.
    block_on(write(&s, "kvbench:postgres:short", b"short", 1)).unwrap();
    assert_eq!(
        block_on(read(&s, "kvbench:postgres:short", Options::default())),
        Ok(Some(5))
    );
    std::thread::sleep(Duration::from_millis(1_300));
    assert_eq!(
        block_on(read(&s, "kvbench:postgres:short", Options::default())),
        Ok(None)
    );
    block_on(s.close());
}

fn the_servers_refusals_are_errors_by_kind(server: &Server) {
    let wrong = store(server.url("not-the-password", "kvbench"));
    let e = block_on(wrong.connect()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth, "{e:?}");
    assert!(e.message.contains("28P01"), "{}", e.message);
    assert!(!e.message.contains("not-the-password"));
    // No connection: the read itself refuses instead of talking to a half-set-up server.
    let e = block_on(read(&wrong, "k", Options::default())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Runtime);

    // A database without the table: not configured, saying what to run.
    let bare = store(server.url(PASSWORD, "postgres"));
    block_on(bare.connect()).unwrap();
    let e = block_on(read(&bare, "kvbench:postgres:k", Options::default())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotConfigured, "{e:?}");
    assert!(e.message.contains("migrations/postgres"), "{}", e.message);
    // The connection stays usable after a statement's error.
    let e = block_on(read(&bare, "kvbench:postgres:k", Options::default())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotConfigured, "{e:?}");

    let e = block_on(store(server.url(PASSWORD, "no_such_db")).connect()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotConfigured, "{e:?}");

    // Nobody listening.
    let nobody = PgUrl::parse(
        &format!(
            "postgres://kvbench:{PASSWORD}@127.0.0.1:{}/kvbench",
            free_port()
        ),
        "POSTGRES_URL",
    )
    .unwrap();
    let e = block_on(store(nobody).connect()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Connect, "{e:?}");
    assert!(!e.message.contains(PASSWORD));
}

/// A server on a free port that answers every connection by running `script` on it.
fn fake(script: fn(TcpStream)) -> PgUrl {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(4) {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || script(conn));
        }
    });
    PgUrl::parse(
        &format!("postgres://kvbench:pw@127.0.0.1:{port}/kvbench?sslmode=disable"),
        "POSTGRES_URL",
    )
    .unwrap()
}

fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Reads what the client sends for a while (its startup, its statement).
fn drain(conn: &mut TcpStream) {
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 65_536];
    let _ = conn.read(&mut buf);
}

/// A startup a trusting server answers: AuthenticationOk, then ReadyForQuery.
fn trusted(conn: &mut TcpStream) {
    drain(conn);
    let mut out = message(b'R', &0u32.to_be_bytes());
    out.extend(message(b'Z', b"I"));
    conn.write_all(&out).unwrap();
    drain(conn);
}

#[test]
fn servers_that_are_not_postgres_or_break_it_are_clear_errors() {
    let connect = |url: PgUrl| block_on(store(url).connect());
    let read_one = |url: PgUrl| {
        let s = store(url);
        block_on(s.connect()).unwrap();
        block_on(read(&s, "kvbench:postgres:k", Options::default()))
    };

    // An HTTP server: its status line read as a message length is far over the limit.
    let e = connect(fake(|mut c| {
        drain(&mut c);
        let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    }))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e:?}");
    assert!(e.message.contains("not PostgreSQL"), "{}", e.message);

    // A Redis server's error line: a tag Postgres has no message for.
    let e = connect(fake(|mut c| {
        drain(&mut c);
        let _ = c.write_all(b"-ERR unknown command\r\n");
    }))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e:?}");

    // A server that closes the connection in the middle of a row.
    let e = read_one(fake(|mut c| {
        trusted(&mut c);
        let mut out = message(b'1', b"");
        out.extend(message(b'2', b""));
        let mut row = message(b'D', &[0, 1, 0, 0, 0x10, 0]);
        row.truncate(9);
        out.extend(row);
        let _ = c.write_all(&out);
    }))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Connect, "{e:?}");
    assert!(e.message.contains("closed"), "{}", e.message);

    // An 8 MiB row: refused from its header, before it is buffered.
    let e = read_one(fake(|mut c| {
        trusted(&mut c);
        let mut out = message(b'1', b"");
        out.extend(message(b'2', b""));
        out.push(b'D');
        out.extend_from_slice(&(8u32 << 20).to_be_bytes());
        let _ = c.write_all(&out);
        let _ = c.write_all(&vec![0u8; 1 << 20]);
    }))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e:?}");
    assert!(e.message.contains("8388608 bytes"), "{}", e.message);

    // Two rows for one key cannot be.
    let e = read_one(fake(|mut c| {
        trusted(&mut c);
        let row = message(b'D', &[0, 1, 0, 0, 0, 1, b'v']);
        let mut out = message(b'1', b"");
        out.extend(message(b'2', b""));
        out.extend(row.clone());
        out.extend(row);
        out.extend(message(b'C', b"SELECT 2\0"));
        out.extend(message(b'Z', b"I"));
        let _ = c.write_all(&out);
        drain(&mut c);
    }))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e:?}");

    // Rows without end (a hostile server): refused at the second row, not buffered without
    // bound (it once grew the isolate to 2 GiB and panicked).
    let e = read_one(fake(|mut c| {
        trusted(&mut c);
        let mut out = message(b'1', b"");
        out.extend(message(b'2', b""));
        let _ = c.write_all(&out);
        let rows: Vec<u8> = (0..1024)
            .flat_map(|_| message(b'D', &[0, 1, 0, 0, 0, 1, b'v']))
            .collect();
        for _ in 0..100_000 {
            if c.write_all(&rows).is_err() {
                return;
            }
        }
    }))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e:?}");
    assert!(e.message.contains("more than 1 row"), "{}", e.message);

    // An authentication method the client does not speak is named.
    fn asks_for(mut c: TcpStream, method: u32) {
        drain(&mut c);
        let _ = c.write_all(&message(b'R', &method.to_be_bytes()));
        drain(&mut c);
    }
    for (url, name) in [
        (fake(|c| asks_for(c, 7)), "GSSAPI"),
        (fake(|c| asks_for(c, 9)), "SSPI"),
    ] {
        let e = connect(url).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Auth, "{e:?}");
        assert!(e.message.contains(name), "{}", e.message);
    }

    // A row of no columns (shorter than the one column asked for), then the end of the query.
    let e = read_one(fake(|mut c| {
        trusted(&mut c);
        let mut out = message(b'1', b"");
        out.extend(message(b'2', b""));
        out.extend(message(b'D', &[0, 0]));
        out.extend(message(b'C', b"SELECT 1\0"));
        out.extend(message(b'Z', b"I"));
        let _ = c.write_all(&out);
        drain(&mut c);
    }))
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e:?}");

    // sslmode=require against a server that says no to TLS.
    let mut url = fake(|mut c| {
        drain(&mut c);
        let _ = c.write_all(b"N");
        drain(&mut c);
    });
    url = PgUrl::parse(
        &format!(
            "postgres://kvbench:pw@127.0.0.1:{}/kvbench?sslmode=require",
            url.port
        ),
        "POSTGRES_URL",
    )
    .unwrap();
    let e = connect(url).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Connect, "{e:?}");
    assert!(e.message.contains("TLS"), "{}", e.message);
}

#[test]
fn a_write_body_carries_the_exact_bytes() {
    let s = store(PgUrl::parse("postgres://u:p@h/d", "POSTGRES_URL").unwrap());
    let bytes = value(70_000, 3);
    let body = s
        .prepare("kvbench:postgres:k", &Value::from_bytes(bytes.clone()), 60)
        .unwrap();
    assert!(
        body.windows(bytes.len()).any(|w| w == bytes.as_slice()),
        "the value travels as it is (binary bytea)"
    );
}
