//! The KV Connect client against a scripted Deno KV server: the metadata exchange and its
//! per-isolate cache, token refresh, the exact protobuf of reads and writes, and every way the
//! server can fail — none of which may leak a token.

use futures::executor::block_on;
use kvbench_core::stores::denokv::{proto, DenoKvStore, MetadataCache};
use kvbench_core::stores::store::Options;
use kvbench_core::{Consistency, ErrorKind, Store, StoreError};
use kvbench_tests::{read, rfc3339, write, FakeClock, MockDenoKv};
use prost::Message;
use serde_json::{json, Value};

const ACCESS_TOKEN: &str = "deno-access-token-5b3e71";
/// 2023-11-14T22:13:20Z: a realistic wall clock, so `expire_at_ms` is a real date.
const NOW_MS: f64 = 1_700_000_000_000.0;

struct Setup {
    clock: FakeClock,
    cache: MetadataCache,
}

impl Setup {
    fn new() -> Self {
        let clock = FakeClock::default();
        clock.now.set(NOW_MS);
        Self {
            clock,
            cache: MetadataCache::default(),
        }
    }

    fn server(&self) -> MockDenoKv<'_> {
        MockDenoKv::new(&self.clock, 5.0, ACCESS_TOKEN)
    }

    fn store<'s>(&'s self, server: &'s MockDenoKv<'s>) -> DenoKvStore<'s, &'s MockDenoKv<'s>> {
        DenoKvStore::new(
            MockDenoKv::URL,
            ACCESS_TOKEN,
            server,
            &self.clock,
            &self.cache,
        )
    }
}

fn strong() -> Options {
    Options::default()
}

fn no_secret(e: &StoreError) {
    assert!(!e.message.contains(ACCESS_TOKEN), "{e}");
    assert!(!e.message.contains("data-token"), "{e}");
}

#[test]
fn metadata_exchange_happens_once_and_is_cached() {
    let s = Setup::new();
    let server = s.server();
    let store = s.store(&server);
    assert_eq!(block_on(store.connect()), Ok(true));
    assert_eq!(block_on(store.connect()), Ok(false));
    assert_eq!(block_on(read(&store, "k", strong())), Ok(None));
    // A second store in the same isolate (the next request) shares the cache.
    let again = s.store(&server);
    assert_eq!(block_on(again.connect()), Ok(false));
    assert_eq!(block_on(read(&again, "k", strong())), Ok(None));
    assert_eq!(server.exchanges(), 1);

    let requests = server.requests.borrow();
    let exchange = &requests[0];
    assert_eq!(
        (exchange.method, exchange.url.as_str()),
        ("POST", MockDenoKv::URL)
    );
    assert!(exchange
        .headers
        .contains(&("Authorization".into(), format!("Bearer {ACCESS_TOKEN}"))));
    assert!(exchange
        .headers
        .contains(&("Content-Type".into(), "application/json".into())));
    let body: Value = serde_json::from_slice(&exchange.body).unwrap();
    assert_eq!(body, json!({"supportedVersions": [1, 2, 3]}));
    // The data path uses the issued token, never the access token.
    for r in &requests[1..] {
        assert!(r
            .headers
            .contains(&("Authorization".into(), "Bearer data-token-1".into())));
        assert!(r.headers.contains(&("x-denokv-version".into(), "3".into())));
        assert!(r.headers.contains(&(
            "x-denokv-database-id".into(),
            MockDenoKv::DATABASE_ID.into()
        )));
        assert!(r
            .headers
            .contains(&("Content-Type".into(), "application/x-protobuf".into())));
    }
    let cached = s.cache.borrow().clone().unwrap();
    assert_eq!(cached.expires_at_ms, NOW_MS + 5.0 + 3_600_000.0);
    assert!(!format!("{cached:?}").contains("data-token"));
}

#[test]
fn token_is_refreshed_before_it_expires_not_before() {
    let s = Setup::new();
    let mut server = s.server();
    server.token_lifetime_ms = 600_000.0; // 10 min: refreshed 1 min before expiry
    let store = s.store(&server);
    assert_eq!(block_on(store.connect()), Ok(true));
    s.clock.advance(530_000.0); // 8 min 50 s in: still fresh
    assert_eq!(block_on(store.connect()), Ok(false));
    s.clock.advance(10_000.0); // within the last minute
    assert_eq!(block_on(read(&store, "k", strong())), Ok(None));
    assert_eq!(server.exchanges(), 2);
    let reads = server.data_requests("snapshot_read");
    assert!(reads[0]
        .headers
        .contains(&("Authorization".into(), "Bearer data-token-2".into())));
    // Long past expiry (an idle isolate): the read exchanges first, then succeeds.
    s.clock.advance(3_600_000.0);
    assert_eq!(block_on(read(&store, "k", strong())), Ok(None));
    assert_eq!(server.exchanges(), 3);
}

#[test]
fn a_missing_key_reads_as_none_with_the_exact_snapshot_read() {
    let s = Setup::new();
    let server = s.server();
    let store = s.store(&server);
    assert_eq!(block_on(read(&store, "k", strong())), Ok(None));
    let read = &server.data_requests("snapshot_read")[0];
    assert_eq!(read.url, format!("{}/v2/snapshot_read", MockDenoKv::URL));
    // SnapshotRead { ranges: [ReadRange { start: [0x02 'k' 0x00], end: start + 0x00, limit: 1 }] }
    assert_eq!(
        read.body,
        [
            0x0a, 0x0d, // ranges (1, LEN 13)
            0x0a, 0x03, 0x02, b'k', 0x00, // start
            0x12, 0x04, 0x02, b'k', 0x00, 0x00, // end
            0x18, 0x01, // limit 1
        ]
    );
}

#[test]
fn a_value_reads_back_as_its_bytes_whatever_the_encoding() {
    let s = Setup::new();
    let server = s.server();
    let store = s.store(&server);
    server.data.borrow_mut().insert(
        b"\x02hit\x00".to_vec(),
        (
            b"value-bytes".to_vec(),
            proto::ValueEncoding::VeBytes as i32,
            0,
        ),
    );
    assert_eq!(block_on(read(&store, "hit", strong())), Ok(Some(11)));
    // A neighbour key (["hit", "x"], or ["hit\0"]) is not this key.
    server
        .data
        .borrow_mut()
        .insert(b"\x02hi\x00\xff\x00".to_vec(), (b"x".to_vec(), 3, 0));
    assert_eq!(block_on(read(&store, "hi", strong())), Ok(None));
    // A string written by Deno code is V8-serialized: still a hit, sized as stored.
    server.data.borrow_mut().insert(
        b"\x02v8\x00".to_vec(),
        (vec![0xff, 0x0f, 0x22, 0x01, b'a'], 1, 0),
    );
    assert_eq!(block_on(read(&store, "v8", strong())).unwrap().unwrap(), 5);
}

#[test]
fn a_write_sends_the_exact_atomic_write_with_expiry_in_milliseconds() {
    let s = Setup::new();
    let server = s.server();
    let store = s.store(&server);
    assert_eq!(block_on(store.connect()), Ok(true));
    // The exchange took 5 ms of mock time; the write expires 60 s after it starts.
    assert_eq!(block_on(write(&store, "k", b"v", 60)), Ok(()));
    let write = &server.data_requests("atomic_write")[0];
    assert_eq!(write.url, format!("{}/v2/atomic_write", MockDenoKv::URL));
    let expire_at_ms: i64 = 1_700_000_000_005 + 60_000;
    let decoded = proto::AtomicWrite::decode(write.body.as_slice()).unwrap();
    assert_eq!(decoded.mutations[0].expire_at_ms, expire_at_ms);
    let mut varint = Vec::new();
    prost::encoding::encode_varint(expire_at_ms as u64, &mut varint);
    let mut mutation = vec![
        0x0a, 0x03, 0x02, b'k', 0x00, // key ["k"]
        0x12, 0x05, 0x0a, 0x01, b'v', 0x10, 0x03, // value { data "v", encoding VE_BYTES }
        0x18, 0x01, // mutation_type M_SET
        0x20, // expire_at_ms
    ];
    mutation.extend_from_slice(&varint);
    let mut expected = vec![0x12, mutation.len() as u8]; // mutations (2, LEN)
    expected.extend_from_slice(&mutation);
    assert_eq!(write.body, expected);
    // What was written reads back, and stops reading back once expired.
    assert_eq!(block_on(read(&store, "k", strong())), Ok(Some(1)));
    s.clock.advance(60_000.0);
    assert_eq!(block_on(read(&store, "k", strong())), Ok(None));
}

#[test]
fn server_errors_are_classified_and_never_quote_a_token() {
    let cases: [(u16, String, ErrorKind); 5] = [
        (401, "Invalid access token.".into(), ErrorKind::Auth),
        (403, "Forbidden".into(), ErrorKind::Auth),
        (
            500,
            "An internal server error occurred.".into(),
            ErrorKind::Http,
        ),
        (429, "slow down".into(), ErrorKind::RateLimited),
        (
            400,
            format!("bad token {ACCESS_TOKEN} / data-token-1"),
            ErrorKind::Http,
        ),
    ];
    for (status, body, kind) in cases {
        // On the data path.
        let s = Setup::new();
        let server = s.server();
        let store = s.store(&server);
        block_on(store.connect()).unwrap();
        server.push_script(status, body.clone());
        let e = block_on(read(&store, "k", strong())).unwrap_err();
        assert_eq!(e.kind, kind, "{status} {body}");
        assert!(e.message.starts_with("snapshot_read: HTTP"), "{e}");
        no_secret(&e);
        // (After a 401 the next call exchanges again first.)
        block_on(store.connect()).unwrap();
        server.push_script(status, body.clone());
        let e = block_on(write(&store, "k", b"v", 60)).unwrap_err();
        assert_eq!(e.kind, kind);
        assert!(e.message.starts_with("atomic_write: HTTP"), "{e}");
        no_secret(&e);
        // On the metadata exchange.
        let s = Setup::new();
        let server = s.server();
        let store = s.store(&server);
        server.push_script(status, body.clone());
        let e = block_on(store.connect()).unwrap_err();
        assert_eq!(e.kind, kind);
        assert!(e.message.starts_with("metadata exchange: HTTP"), "{e}");
        // (No data token has been issued yet: only the access token is a secret here.)
        assert!(!e.message.contains(ACCESS_TOKEN), "{e}");
        assert!(
            s.cache.borrow().is_none(),
            "a failed exchange is not cached"
        );
    }
}

#[test]
fn a_data_path_401_forces_a_new_exchange() {
    let s = Setup::new();
    let server = s.server();
    let store = s.store(&server);
    block_on(store.connect()).unwrap();
    server.tokens.borrow_mut().clear(); // the server forgot (revoked) the token
    let e = block_on(read(&store, "k", strong())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert_eq!(block_on(store.connect()), Ok(true));
    assert_eq!(block_on(read(&store, "k", strong())), Ok(None));
}

#[test]
fn a_wrong_access_token_is_an_auth_error() {
    let s = Setup::new();
    let server = s.server();
    let store = DenoKvStore::new(
        MockDenoKv::URL,
        "wrong-token-1234",
        &server,
        &s.clock,
        &s.cache,
    );
    let e = block_on(read(&store, "k", strong())).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert_eq!(
        e.message,
        "metadata exchange: HTTP 401: Invalid access token."
    );
}

#[test]
fn malformed_answers_are_decode_errors() {
    let metadata = |body: &str| {
        let s = Setup::new();
        let server = s.server();
        let store = s.store(&server);
        server.push_script(200, body.as_bytes().to_vec());
        block_on(store.connect()).unwrap_err()
    };
    for body in [
        "<html>captive portal</html>",
        r#"{"version":4,"databaseId":"x","endpoints":[{"url":"/v2","consistency":"strong"}],"token":"t","expiresAt":"2030-01-01T00:00:00Z"}"#,
        r#"{"version":3,"databaseId":"x","endpoints":[],"token":"t","expiresAt":"2030-01-01T00:00:00Z"}"#,
        r#"{"version":3,"databaseId":"x","endpoints":[{"url":"/v2","consistency":"strong"}],"token":"t","expiresAt":"soon"}"#,
    ] {
        let e = metadata(body);
        assert_eq!(e.kind, ErrorKind::Decode, "{body}: {e}");
        assert!(e.message.starts_with("metadata exchange: "), "{e}");
    }

    let s = Setup::new();
    let server = s.server();
    let store = s.store(&server);
    block_on(store.connect()).unwrap();
    // Truncated protobuf: a LEN field claiming 50 bytes, with 2.
    for garbage in [vec![0x0a, 0x32, 0x01, 0x02], b"<html>502</html>".to_vec()] {
        server.push_script(200, garbage.clone());
        let e = block_on(read(&store, "k", strong())).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Decode, "{e}");
        assert!(
            e.message.starts_with("snapshot_read: invalid protobuf"),
            "{e}"
        );
        server.push_script(200, garbage);
        let e = block_on(write(&store, "k", b"v", 60)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Decode, "{e}");
    }
    // Well-formed but wrong: no range answered, an unspecified status, a failed write.
    let no_ranges = proto::SnapshotReadOutput {
        status: proto::SnapshotReadStatus::SrSuccess as i32,
        read_is_strongly_consistent: true,
        ..Default::default()
    };
    server.push_script(200, no_ranges.encode_to_vec());
    assert_eq!(
        block_on(read(&store, "k", strong())).unwrap_err().kind,
        ErrorKind::Decode
    );
    server.push_script(200, Vec::new()); // all defaults: status SR_UNSPECIFIED
    assert_eq!(
        block_on(read(&store, "k", strong())).unwrap_err().kind,
        ErrorKind::Http
    );
    let check_failed = proto::AtomicWriteOutput {
        status: proto::AtomicWriteStatus::AwCheckFailure as i32,
        ..Default::default()
    };
    server.push_script(200, check_failed.encode_to_vec());
    let e = block_on(write(&store, "k", b"v", 60)).unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Http, "atomic_write: a check failed")
    );
}

#[test]
fn disabled_or_weak_answers_force_a_new_exchange() {
    let s = Setup::new();
    let server = s.server();
    let store = s.store(&server);
    block_on(store.connect()).unwrap();
    let weak = proto::SnapshotReadOutput {
        ranges: vec![proto::ReadRangeOutput::default()],
        status: proto::SnapshotReadStatus::SrSuccess as i32,
        read_is_strongly_consistent: false,
        ..Default::default()
    };
    server.push_script(200, weak.encode_to_vec());
    assert!(block_on(read(&store, "k", strong())).is_err());
    assert_eq!(block_on(store.connect()), Ok(true));
    // The same answer is fine for an eventual read.
    server.push_script(200, weak.encode_to_vec());
    let eventual = Options {
        consistency: Consistency::Eventual,
        ..Default::default()
    };
    assert_eq!(block_on(read(&store, "k", eventual.clone())), Ok(None));
    let disabled = proto::SnapshotReadOutput {
        status: proto::SnapshotReadStatus::SrReadDisabled as i32,
        ..weak
    };
    server.push_script(200, disabled.encode_to_vec());
    assert!(block_on(read(&store, "k", eventual)).is_err());
    assert!(s.cache.borrow().is_none());
}

#[test]
fn protocol_version_1_uses_the_transaction_domain_header() {
    let s = Setup::new();
    let mut server = s.server();
    server.version = 1;
    let store = s.store(&server);
    assert_eq!(block_on(write(&store, "k", b"v1", 60)), Ok(()));
    let write = &server.data_requests("atomic_write")[0];
    assert!(write.headers.contains(&(
        "x-transaction-domain-id".into(),
        MockDenoKv::DATABASE_ID.into()
    )));
    assert!(!write.headers.iter().any(|(k, _)| k == "x-denokv-version"));
}

#[test]
fn expiry_dates_round_trip_through_the_mock_formatter() {
    assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339(NOW_MS + 1.0), "2023-11-14T22:13:20.001Z");
    assert_eq!(
        kvbench_core::stores::denokv::client::parse_rfc3339_ms(&rfc3339(NOW_MS + 1.0)),
        Some(NOW_MS + 1.0)
    );
}
