//! The `redis` store's RESP client against a real `redis-server` that this test spawns on a
//! free loopback port with a password (`REDIS_SERVER_BIN`, else `redis-server` on PATH), over
//! plain blocking TCP: AUTH, GET, SET with EX, a 1 MiB value, and the server's own errors.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::executor::block_on;
use kvbench_core::stores::redis::command;
use kvbench_core::stores::store::Options;
use kvbench_core::{ErrorKind, RedisStore, RedisUrl, Store};
use kvbench_tests::{free_port, read, write, Tcp};

const PASSWORD: &str = "native-redis-password-3c9a";

/// A running `redis-server` without persistence, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start() -> Server {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".into());
        let port = free_port();
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--requirepass",
                PASSWORD,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start `{bin}` ({e}): install redis-server or set REDIS_SERVER_BIN")
            });
        let mut server = Server { child, port };
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

    fn url(&self, password: &str) -> RedisUrl {
        RedisUrl::parse(&format!(
            "redis://default:{password}@127.0.0.1:{}",
            self.port
        ))
        .unwrap()
    }

    /// One command on a connection of its own (as another client would), its raw reply.
    fn raw(&self, args: &[&[u8]]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.write_all(&command(&[b"AUTH", PASSWORD.as_bytes()]))
            .unwrap();
        s.write_all(&command(args)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        s.set_nonblocking(true).unwrap();
        let mut out = vec![0; 4096];
        let n = s.read(&mut out).unwrap_or(0);
        String::from_utf8_lossy(&out[..n])
            .trim_start_matches("+OK\r\n")
            .to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tests of this file run one at a time: each picks a free port and then starts its server,
/// so two at once can pick the same port, and one test's "no server" step would stop the server
/// the other is talking to (seen once: "connect + AUTH" failed under load).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn reads_and_writes_against_a_real_redis_server() {
    let _one = one_at_a_time();
    let server = Server::start();
    let store = RedisStore::new(server.url(PASSWORD), Tcp);
    assert_eq!(block_on(store.connect()), Ok(true), "connect + AUTH");
    assert_eq!(
        block_on(store.connect()),
        Ok(false),
        "one connection per request"
    );

    let key = "kvbench:redis:native";
    assert_eq!(block_on(read(&store, key, Options::default())), Ok(None));
    let value: Vec<u8> = (0..1_048_576u32).map(|i| b'a' + (i % 26) as u8).collect();
    assert_eq!(block_on(write(&store, key, &value, 90)), Ok(()));
    assert_eq!(
        block_on(read(&store, key, Options::default())),
        Ok(Some(value.len() as u64)),
        "a 1 MiB value read whole"
    );
    // Another client sees the same bytes, expiring in seconds (EX), not milliseconds.
    assert_eq!(
        server.raw(&[b"STRLEN", key.as_bytes()]),
        format!(":{}\r\n", value.len())
    );
    let ttl: u32 = server.raw(&[b"TTL", key.as_bytes()])[1..]
        .trim()
        .parse()
        .unwrap();
    assert!((80..=90).contains(&ttl), "TTL {ttl} s");
    // A value another client wrote, not UTF-8, is a hit at its stored length.
    server.raw(&[b"SET", b"kvbench:redis:binary", &[0xFF; 1000]]);
    assert_eq!(
        block_on(read(&store, "kvbench:redis:binary", Options::default())),
        Ok(Some(1000))
    );
    // A command error leaves the connection usable.
    server.raw(&[b"LPUSH", b"kvbench:redis:list", b"x"]);
    let e = block_on(read(&store, "kvbench:redis:list", Options::default())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Http, "{e:?}");
    assert!(e.message.contains("WRONGTYPE"), "{}", e.message);
    assert_eq!(
        block_on(read(&store, key, Options::default())),
        Ok(Some(1_048_576))
    );
    block_on(store.close());
}

#[test]
fn a_wrong_password_or_no_server_fails_the_setup() {
    let _one = one_at_a_time();
    let server = Server::start();
    let wrong = RedisStore::new(server.url("not-the-password"), Tcp);
    let e = block_on(wrong.connect()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth, "{e:?}");
    assert!(!e.message.contains("not-the-password"));
    // No connection: the read itself refuses instead of talking to a half-set-up server.
    let e = block_on(read(&wrong, "k", Options::default())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Runtime);

    let nobody = RedisUrl::parse(&format!("redis://127.0.0.1:{}", free_port())).unwrap();
    let e = block_on(RedisStore::new(nobody, Tcp).connect()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Connect, "{e:?}");

    // Without AUTH, a password-protected server refuses commands.
    let anonymous = RedisUrl::parse(&format!("redis://127.0.0.1:{}", server.port)).unwrap();
    let store = RedisStore::new(anonymous, Tcp);
    assert_eq!(block_on(store.connect()), Ok(true));
    let e = block_on(read(&store, "k", Options::default())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth, "NOAUTH: {e:?}");
}
