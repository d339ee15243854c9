//! The KV Connect client against a real self-hosted `denokv` (0.14.0) that this test spawns on a
//! free loopback port with a fresh SQLite file. The binary comes from `DENOKV_BIN`, else `denokv`
//! on PATH (`npm run setup` installs it). Expiry is checked in the SQLite file with the `sqlite3`
//! CLI, since KV Connect does not expose it.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::executor::block_on;
use kvbench_core::stores::denokv::{DenoKvStore, MetadataCache};
use kvbench_core::stores::store::Options;
use kvbench_core::{
    Clock, Consistency, ErrorKind, HttpRequest, HttpResponse, HttpTransport, Store, StoreError,
};

use kvbench_tests::{read, write};

const ACCESS_TOKEN: &str = "native-denokv-token-8f1e2d";

/// A running `denokv`, killed (and its database removed) on drop.
struct Server {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Server {
    fn start() -> Server {
        let bin = std::env::var("DENOKV_BIN").unwrap_or_else(|_| "denokv".into());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "kvbench-denokv-{}-{port}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let child = Command::new(&bin)
            .arg("--sqlite-path")
            .arg(dir.join("kv.sqlite"))
            .args(["serve", "--access-token", ACCESS_TOKEN, "--addr"])
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `{bin}` ({e}): install it with `cargo install denokv --version \
                     0.14.0 --locked` (npm run setup does) or set DENOKV_BIN"
                )
            });
        let mut server = Server {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..200 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("`{bin}` exited before listening: {status}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("`{bin}` did not listen on 127.0.0.1:{port} within 10 s");
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `(v_encoding, expiration_ms)` of the encoded key `hex_key`, read from the SQLite file.
    fn row(&self, hex_key: &str) -> Option<(i64, i64)> {
        let out = Command::new("sqlite3")
            .arg(self.dir.join("kv.sqlite"))
            .arg(format!(
                "select v_encoding, expiration_ms from kv where hex(k) = '{hex_key}'"
            ))
            .output()
            .expect("the sqlite3 CLI (apt-get install sqlite3; npm run setup installs it)");
        assert!(out.status.success(), "sqlite3: {:?}", out);
        let text = String::from_utf8_lossy(&out.stdout);
        let (encoding, expiration) = text.trim().split_once('|')?;
        Some((encoding.parse().ok()?, expiration.parse().ok()?))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Blocking HTTP/1.1 over loopback: good enough for `block_on` in a test.
struct Ureq(ureq::Agent);

#[async_trait(?Send)]
impl HttpTransport for &Ureq {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError> {
        let mut call = self.0.request(request.method, &request.url);
        for (name, value) in &request.headers {
            call = call.set(name, value);
        }
        let response = match call.send_bytes(&request.body) {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return Err(StoreError::new(ErrorKind::Runtime, e.kind().to_string())),
        };
        let status = response.status();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut response.into_reader(), &mut body)
            .map_err(|e| StoreError::new(ErrorKind::Runtime, e.to_string()))?;
        Ok(HttpResponse {
            status,
            body: body.into(),
        })
    }
}

struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_millis() as f64)
    }
}

fn agent() -> Ureq {
    Ureq(
        ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(10))
            .build(),
    )
}

#[test]
fn reads_and_writes_against_a_real_denokv() {
    let mut server = Server::start();
    let http = agent();
    let cache = MetadataCache::default();
    let store = DenoKvStore::new(server.url.clone(), ACCESS_TOKEN, &http, &WallClock, &cache);
    let strong = Options::default();

    // The metadata exchange, once per isolate.
    assert_eq!(block_on(store.connect()), Ok(true));
    assert_eq!(block_on(store.connect()), Ok(false));
    let meta = cache.borrow().clone().expect("metadata cached");
    assert_eq!(meta.version, 3, "denokv 0.14 negotiates protocol version 3");
    assert_eq!(meta.strong, [format!("{}/v2", server.url)]);
    let ahead = meta.expires_at_ms - WallClock.now_ms();
    assert!(
        ahead > 23.0 * 3_600_000.0,
        "denokv tokens live a day: {ahead} ms"
    );

    // Miss, write, hit: the same bytes; the key is the tuple ["kvbench-native"].
    let key = "kvbench-native";
    assert_eq!(block_on(read(&store, key, strong.clone())), Ok(None));
    let value: Vec<u8> = (0..65_536u32).map(|i| b'A' + (i % 26) as u8).collect();
    let before = WallClock.now_ms();
    assert_eq!(block_on(write(&store, key, &value, 120)), Ok(()));
    let after = WallClock.now_ms();
    assert_eq!(
        block_on(read(&store, key, strong.clone())),
        Ok(Some(value.len() as u64))
    );
    let eventual = Options {
        consistency: Consistency::Eventual,
        ..Default::default()
    };
    assert_eq!(
        block_on(read(&store, key, eventual)),
        Ok(Some(value.len() as u64))
    );

    // Stored as raw bytes (VE_BYTES = 3), expiring 120 s (not 120 ms) after the write.
    let hex_key: String = kvbench_core::stores::denokv::key::encode(&[key])
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let (encoding, expiration_ms) = server.row(&hex_key).expect("row in kv table");
    assert_eq!(encoding, 3);
    let expiration_ms = expiration_ms as f64;
    assert!(
        expiration_ms >= (before.floor() + 120_000.0) && expiration_ms <= after + 120_000.0,
        "expiration {expiration_ms} not 120 s after [{before}, {after}]"
    );

    // Deno KV's limits are real: one byte over the value limit is refused by the server.
    let e = block_on(write(&store, key, &vec![b'x'; 65_537], 60)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Http);
    assert!(e.message.contains("value size limit"), "{e}");

    // A wrong access token is an auth error that does not quote either token.
    let other = MetadataCache::default();
    let wrong = DenoKvStore::new(
        server.url.clone(),
        "wrong-token-12345",
        &http,
        &WallClock,
        &other,
    );
    let e = block_on(read(&wrong, key, strong.clone())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth, "{e}");
    assert!(!e.message.contains("wrong-token") && !e.message.contains(ACCESS_TOKEN));

    // A stopped server is a runtime error, whether metadata is cached or not.
    server.stop();
    assert_eq!(
        block_on(read(&store, key, strong)).unwrap_err().kind,
        ErrorKind::Runtime
    );
    let cold = MetadataCache::default();
    let fresh = DenoKvStore::new(server.url.clone(), ACCESS_TOKEN, &http, &WallClock, &cold);
    let e = block_on(fresh.connect()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Runtime);
    assert!(e.message.starts_with("metadata exchange: "), "{e}");
}
