//! A KV Connect client over [`HttpTransport`] (`kv-connect.md` of `denokv_proto` 0.14.0): the
//! JSON metadata exchange, cached per isolate ([`MetadataCache`], borrowed only between awaits)
//! and refreshed before it expires, and the protobuf data path. No retries: a failed call is a
//! data point.

use std::cell::RefCell;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::rc::Rc;

use prost::Message;
use serde_json::Value;

use super::proto;
use crate::clock::Clock;
use crate::error::{quote, ErrorKind, StoreError};
use crate::stores::http::{Body, HttpRequest, HttpResponse, HttpTransport};
use crate::stores::secret::redact;
use crate::stores::store::Consistency;

/// The protocol versions this client speaks (1 and 2 differ only in headers; 3 adds `status`).
pub const SUPPORTED_VERSIONS: [u32; 3] = [1, 2, 3];
/// Refresh the metadata this long before it expires (or at half its lifetime, if shorter).
pub const REFRESH_MARGIN_MS: f64 = 60_000.0;
const USER_AGENT: &str = concat!("kvbench/", env!("CARGO_PKG_VERSION"));

/// The per-isolate metadata slot. Lives as long as the isolate; shared by every request.
pub type MetadataCache = RefCell<Option<Rc<Metadata>>>;

/// The result of a metadata exchange. `Debug` leaves the token out.
#[derive(Clone, PartialEq)]
pub struct Metadata {
    pub version: u32,
    pub database_id: String,
    /// Resolved data-path URLs of the strongly consistent endpoints (at least one).
    pub strong: Vec<String>,
    /// Resolved data-path URLs of the eventually consistent endpoints (maybe none).
    pub eventual: Vec<String>,
    /// The data-path bearer token. Secret.
    pub token: String,
    pub expires_at_ms: f64,
    /// When this client exchanges again: `expires_at_ms` minus the refresh margin.
    pub refresh_at_ms: f64,
    /// Which connect URL and access token produced this metadata (the token only as a hash).
    source: (String, u64),
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metadata")
            .field("version", &self.version)
            .field("database_id", &self.database_id)
            .field("strong", &self.strong)
            .field("eventual", &self.eventual)
            .field("token", &"[redacted]")
            .field("expires_at_ms", &self.expires_at_ms)
            .field("refresh_at_ms", &self.refresh_at_ms)
            .finish()
    }
}

impl Metadata {
    /// The endpoint a read of `consistency` goes to: for eventual reads an eventual endpoint
    /// when the database has one (Deno Deploy's nearby replicas), else a strong one.
    pub fn read_endpoint(&self, consistency: Consistency) -> &str {
        let eventual = match consistency {
            Consistency::Eventual => self.eventual.first(),
            Consistency::Strong => None,
        };
        eventual.or(self.strong.first()).map_or("", String::as_str)
    }
}

/// A KV Connect database: its connect URL and access token, the transport, a wall clock (for
/// token expiry and `expire_at_ms`) and the isolate's metadata cache.
pub struct KvConnect<'a, T> {
    url: String,
    access_token: String,
    transport: T,
    clock: &'a dyn Clock,
    cache: &'a MetadataCache,
}

impl<'a, T: HttpTransport> KvConnect<'a, T> {
    pub fn new(
        url: impl Into<String>,
        access_token: impl Into<String>,
        transport: T,
        clock: &'a dyn Clock,
        cache: &'a MetadataCache,
    ) -> Self {
        Self {
            url: url.into(),
            access_token: access_token.into(),
            transport,
            clock,
            cache,
        }
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    pub fn now_ms(&self) -> f64 {
        self.clock.now_ms()
    }

    fn source(&self) -> (String, u64) {
        let mut h = DefaultHasher::new();
        self.access_token.hash(&mut h);
        (self.url.clone(), h.finish())
    }

    /// Cached metadata if still fresh for this URL and access token, else a new exchange.
    /// The flag says whether the exchange happened in this call.
    pub async fn metadata(&self) -> Result<(Rc<Metadata>, bool), StoreError> {
        let cached = self.cache.borrow().clone();
        if let Some(m) = cached {
            if self.now_ms() < m.refresh_at_ms && m.source == self.source() {
                return Ok((m, false));
            }
        }
        let fresh = Rc::new(self.exchange().await?);
        *self.cache.borrow_mut() = Some(fresh.clone());
        Ok((fresh, true))
    }

    /// Forgets the cached metadata, so the next call exchanges again (after a data-path 401,
    /// or when the server says this endpoint cannot serve us).
    pub fn invalidate(&self) {
        self.cache.borrow_mut().take();
    }

    /// The metadata exchange request, exactly as sent.
    pub fn metadata_request(&self) -> HttpRequest {
        HttpRequest {
            method: "POST",
            url: self.url.clone(),
            headers: vec![
                (
                    "Authorization".into(),
                    format!("Bearer {}", self.access_token),
                ),
                ("Content-Type".into(), "application/json".into()),
                ("User-Agent".into(), USER_AGENT.into()),
            ],
            body: serde_json::json!({ "supportedVersions": SUPPORTED_VERSIONS })
                .to_string()
                .into_bytes(),
            prepared: None,
        }
    }

    /// Performs the metadata exchange (uncached).
    pub async fn exchange(&self) -> Result<Metadata, StoreError> {
        let context = |e: StoreError| self.redact(prefixed("metadata exchange", e), None);
        let response = self
            .transport
            .send(self.metadata_request())
            .await
            .map_err(context)?;
        check_status(&response, &[&self.access_token]).map_err(context)?;
        parse_metadata(&response.body, &self.url, self.now_ms(), self.source()).map_err(context)
    }

    /// The data-path request to `endpoint/<op>` with `body`, exactly as sent.
    pub fn data_request(
        &self,
        meta: &Metadata,
        endpoint: &str,
        op: &str,
        body: Vec<u8>,
    ) -> HttpRequest {
        let mut headers = vec![
            ("Authorization".into(), format!("Bearer {}", meta.token)),
            ("Content-Type".into(), "application/x-protobuf".into()),
            ("User-Agent".into(), USER_AGENT.into()),
        ];
        if meta.version >= 2 {
            headers.push(("x-denokv-version".into(), meta.version.to_string()));
            headers.push(("x-denokv-database-id".into(), meta.database_id.clone()));
        } else {
            headers.push(("x-transaction-domain-id".into(), meta.database_id.clone()));
        }
        HttpRequest {
            method: "POST",
            url: format!("{endpoint}/{op}"),
            headers,
            body,
            prepared: None,
        }
    }

    async fn call(
        &self,
        meta: &Metadata,
        endpoint: &str,
        op: &str,
        body: Payload,
    ) -> Result<Body, StoreError> {
        let context = |e: StoreError| self.redact(prefixed(op, e), Some(meta));
        let request = match body {
            Payload::Bytes(body) => self.data_request(meta, endpoint, op, body),
            Payload::Prepared(prepared) => {
                let mut request = self.data_request(meta, endpoint, op, Vec::new());
                request.prepared = Some(prepared);
                request
            }
        };
        let response = self.transport.send(request).await.map_err(context)?;
        if matches!(response.status, 401 | 403) {
            // The token may have been revoked early: exchange again on the next request.
            self.invalidate();
        }
        check_status(&response, &[&self.access_token, &meta.token]).map_err(context)?;
        Ok(response.body)
    }

    /// Reads `ranges` in one snapshot. Fails unless the server answers every range.
    pub async fn snapshot_read(
        &self,
        ranges: Vec<proto::ReadRange>,
        consistency: Consistency,
    ) -> Result<Vec<proto::ReadRangeOutput>, StoreError> {
        let raw = self.snapshot_read_raw(ranges, consistency).await?;
        raw.decode().map_err(|refused| self.refused(refused))
    }

    /// A refused answer's error, forgetting the metadata when it is stale.
    pub fn refused(&self, refused: Refused) -> StoreError {
        if refused.stale {
            self.invalidate();
        }
        refused.error
    }

    /// [`KvConnect::snapshot_read`] up to the answer, not yet decoded (see [`RawSnapshot`]).
    pub async fn snapshot_read_raw(
        &self,
        ranges: Vec<proto::ReadRange>,
        consistency: Consistency,
    ) -> Result<RawSnapshot, StoreError> {
        let (meta, _) = self.metadata().await?;
        let wanted = ranges.len();
        let body = proto::SnapshotRead { ranges }.encode_to_vec();
        let endpoint = meta.read_endpoint(consistency);
        let body = self
            .call(&meta, endpoint, "snapshot_read", Payload::Bytes(body))
            .await?;
        Ok(RawSnapshot {
            body,
            wanted,
            version: u64::from(meta.version),
            consistency,
        })
    }

    /// Applies `write` atomically; `Ok` carries the commit's versionstamp.
    pub async fn atomic_write(&self, write: proto::AtomicWrite) -> Result<Vec<u8>, StoreError> {
        self.atomic_write_encoded(Payload::Bytes(write.encode_to_vec()))
            .await
    }

    /// [`KvConnect::atomic_write`] of an `AtomicWrite` already encoded (before a timed span).
    pub async fn atomic_write_encoded(&self, body: Payload) -> Result<Vec<u8>, StoreError> {
        let (meta, _) = self.metadata().await?;
        let endpoint = meta.strong.first().map_or("", String::as_str);
        let bytes = self.call(&meta, endpoint, "atomic_write", body).await?;
        let bytes = bytes.bytes();
        let output = proto::AtomicWriteOutput::decode(bytes)
            .map_err(|e| decode_error("atomic_write", &e))?;
        match proto::AtomicWriteStatus::try_from(output.status) {
            Ok(proto::AtomicWriteStatus::AwSuccess) => Ok(output.versionstamp),
            Ok(proto::AtomicWriteStatus::AwCheckFailure) => Err(StoreError::new(
                ErrorKind::Http,
                "atomic_write: a check failed",
            )),
            Ok(proto::AtomicWriteStatus::AwWriteDisabled) => {
                self.invalidate();
                Err(StoreError::new(
                    ErrorKind::Http,
                    "atomic_write: writes are disabled on this endpoint",
                ))
            }
            _ => Err(StoreError::new(
                ErrorKind::Http,
                format!("atomic_write: status {} is not a success", output.status),
            )),
        }
    }

    /// No message leaves this client with a secret in it, whatever a server echoes.
    fn redact(&self, mut error: StoreError, meta: Option<&Metadata>) -> StoreError {
        let secrets = [
            Some(self.access_token.as_str()),
            meta.map(|m| m.token.as_str()),
        ];
        for secret in secrets.into_iter().flatten() {
            if !secret.is_empty() && error.message.contains(secret) {
                error.message = error.message.replace(secret, "[redacted]");
            }
        }
        error
    }
}

fn prefixed(what: &str, mut e: StoreError) -> StoreError {
    e.message = format!("{what}: {}", e.message);
    e
}

fn decode_error(op: &str, e: &prost::DecodeError) -> StoreError {
    StoreError::new(
        ErrorKind::Decode,
        format!("{op}: invalid protobuf answer: {e}"),
    )
}

/// A request body for [`KvConnect`]'s data path: bytes, or taken by the transport beforehand.
pub enum Payload {
    Bytes(Vec<u8>),
    Prepared(crate::stores::http::PreparedBody),
}

/// A `snapshot_read` answer as it came (its body may still be outside wasm), decoded by
/// [`RawSnapshot::decode`] — the `denokv` store does that after every span for a large answer.
pub struct RawSnapshot {
    pub body: Body,
    wanted: usize,
    version: u64,
    consistency: Consistency,
}

/// Why a snapshot answer was refused, and whether it means the cached metadata is stale (the
/// client should exchange again).
pub struct Refused {
    pub error: StoreError,
    pub stale: bool,
}

impl RawSnapshot {
    /// The ranges the answer holds, checked as [`KvConnect::snapshot_read`] checks them.
    pub fn decode(self) -> Result<Vec<proto::ReadRangeOutput>, Refused> {
        let RawSnapshot {
            body,
            wanted,
            version,
            consistency,
        } = self;
        let refused = |error: StoreError, stale: bool| Refused { error, stale };
        let output = proto::SnapshotReadOutput::decode(body.bytes())
            .map_err(|e| refused(decode_error("snapshot_read", &e), false))?;
        let disabled = if version >= 3 {
            match proto::SnapshotReadStatus::try_from(output.status) {
                Ok(proto::SnapshotReadStatus::SrSuccess) => false,
                Ok(proto::SnapshotReadStatus::SrReadDisabled) => true,
                _ => {
                    return Err(refused(
                        StoreError::new(
                            ErrorKind::Http,
                            format!("snapshot_read: status {} is not a success", output.status),
                        ),
                        false,
                    ))
                }
            }
        } else {
            output.read_disabled
        };
        if disabled {
            return Err(refused(
                StoreError::new(
                    ErrorKind::Http,
                    "snapshot_read: reads are disabled on this endpoint",
                ),
                true,
            ));
        }
        if consistency == Consistency::Strong && version >= 2 && !output.read_is_strongly_consistent
        {
            return Err(refused(
                StoreError::new(
                    ErrorKind::Http,
                    "snapshot_read: a strong read was not answered strongly consistent",
                ),
                true,
            ));
        }
        if output.ranges.len() != wanted {
            return Err(refused(
                StoreError::new(
                    ErrorKind::Decode,
                    format!(
                        "snapshot_read: {} ranges answered for {wanted} asked",
                        output.ranges.len()
                    ),
                ),
                false,
            ));
        }
        Ok(output.ranges)
    }
}

fn check_status(response: &HttpResponse, secrets: &[&str]) -> Result<(), StoreError> {
    if (200..300).contains(&response.status) {
        Ok(())
    } else {
        Err(StoreError::http_status(
            response.status,
            &redact(&String::from_utf8_lossy(&response.body), secrets),
        ))
    }
}

fn bad_metadata(message: impl Into<String>) -> StoreError {
    StoreError::new(ErrorKind::Decode, message)
}

/// What is wrong with an answer that is not metadata (never quoting it: it may hold a token).
fn not_metadata(why: &str) -> StoreError {
    bad_metadata(format!("answer is not KV Connect metadata ({why})"))
}

/// The metadata's endpoints, resolved against the connect URL `base`: the strong ones, then the
/// eventual ones (other consistency levels are skipped).
fn endpoint_urls(
    endpoints: &[Value],
    base: &str,
) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let base = url::Url::parse(base).map_err(|e| {
        StoreError::new(
            ErrorKind::NotConfigured,
            format!(
                "invalid connect URL: {}",
                crate::stores::http::url_unparsable(e)
            ),
        )
    })?;
    let (mut strong, mut eventual) = (Vec::new(), Vec::new());
    for endpoint in endpoints {
        let field = |name: &str| endpoint.get(name).and_then(Value::as_str);
        let (Some(url), Some(consistency)) = (field("url"), field("consistency")) else {
            return Err(not_metadata("an endpoint lacks `url` or `consistency`"));
        };
        let resolved = base
            .join(url)
            .map_err(|e| bad_metadata(format!("endpoint URL {:?}: {e}", quote(url))))?;
        let resolved = resolved.as_str().trim_end_matches('/').to_string();
        match consistency {
            "strong" => strong.push(resolved),
            "eventual" => eventual.push(resolved),
            _ => {} // a consistency level from the future: not ours to use
        }
    }
    Ok((strong, eventual))
}

/// Validates a metadata exchange answer (`kv-metadata-exchange-response.v<N>.json`).
fn parse_metadata(
    body: &[u8],
    base: &str,
    now_ms: f64,
    source: (String, u64),
) -> Result<Metadata, StoreError> {
    // Through `Value` (a derived `Deserialize` would add a second JSON parser to the wasm). The
    // answer carries a token: name what is wrong, never quote it.
    let wire: Value = serde_json::from_slice(body).map_err(|_| {
        bad_metadata(format!(
            "answer is not KV Connect metadata (not JSON): {:?}",
            quote(&String::from_utf8_lossy(body))
        ))
    })?;
    let text = |field: &str| {
        wire.get(field)
            .and_then(Value::as_str)
            .ok_or_else(|| not_metadata(&format!("no string `{field}`")))
    };
    let version = wire
        .get("version")
        .and_then(Value::as_u64)
        .ok_or_else(|| not_metadata("no integer `version`"))?;
    let (database_id, token, expires_at) =
        (text("databaseId")?, text("token")?, text("expiresAt")?);
    let endpoints = wire
        .get("endpoints")
        .and_then(Value::as_array)
        .ok_or_else(|| not_metadata("no array `endpoints`"))?;
    let version = u32::try_from(version).unwrap_or(u32::MAX);
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(bad_metadata(format!(
            "server chose protocol version {version}, this client speaks {SUPPORTED_VERSIONS:?}"
        )));
    }
    let (strong, eventual) = endpoint_urls(endpoints, base)?;
    if strong.is_empty() {
        return Err(bad_metadata("no endpoint with strong consistency"));
    }
    let expires_at_ms = parse_rfc3339_ms(expires_at).ok_or_else(|| {
        bad_metadata(format!(
            "expiresAt {:?} is not a date-time",
            quote(expires_at)
        ))
    })?;
    let margin = REFRESH_MARGIN_MS.min(((expires_at_ms - now_ms) / 2.0).max(0.0));
    Ok(Metadata {
        version,
        database_id: database_id.to_string(),
        strong,
        eventual,
        token: token.to_string(),
        expires_at_ms,
        refresh_at_ms: expires_at_ms - margin,
        source,
    })
}

/// Milliseconds since the Unix epoch of an RFC 3339 date-time (`2023-10-01T00:00:00Z`,
/// `...T00:00:00.123456789+02:00`), or `None` if it is not one.
pub fn parse_rfc3339_ms(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let at = |i: usize| b.get(i).copied();
    if b.len() < 20
        || at(4) != Some(b'-')
        || at(7) != Some(b'-')
        || !matches!(at(10), Some(b'T' | b't' | b' '))
        || at(13) != Some(b':')
        || at(16) != Some(b':')
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut fraction_ms = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        // Integer digits only (no float parsing, which would pull `dec2flt` into the wasm).
        let mut scale = 100.0;
        for &digit in b.get(start..i)? {
            fraction_ms += f64::from(digit - b'0') * scale;
            scale /= 10.0;
        }
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && at(i + 3) == Some(b':') => {
            let minutes = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if *sign == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Some(seconds as f64 * 1000.0 + fraction_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_table() {
        let cases = [
            ("1970-01-01T00:00:00Z", Some(0.0)),
            ("2023-10-01T00:00:00Z", Some(1_696_118_400_000.0)),
            ("2023-10-01T00:00:00.250Z", Some(1_696_118_400_250.0)),
            ("2023-10-01T02:00:00+02:00", Some(1_696_118_400_000.0)),
            ("2023-09-30T23:00:00-01:00", Some(1_696_118_400_000.0)),
            (
                "2024-02-29T12:00:00.123456789Z",
                Some(1_709_208_000_123.456_7),
            ),
            ("2023-10-01T00:00:00", None),
            ("2023-13-01T00:00:00Z", None),
            ("2023-10-01T00:00:00.Z", None),
            ("2023-10-01T00:00:00Zjunk", None),
            ("not a date at all, no", None),
            ("", None),
            ("2023-10-01T0é:00:00Z", None),
        ];
        for (text, want) in cases {
            let got = parse_rfc3339_ms(text);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 0.001, "{text}: {g} vs {w}"),
                (g, w) => assert_eq!(g, w, "{text}"),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2000,
            failure_persistence: None,
            ..Default::default()
        })]

        /// humantime as the reference: a UTC date-time it reads is the same instant here.
        #[test]
        fn rfc3339_reads_as_humantime_does(
            text in "(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T\
                     ([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|\\+00:00)",
        ) {
            if let Ok(t) = humantime::parse_rfc3339(&text) {
                let d = t.duration_since(std::time::UNIX_EPOCH).unwrap();
                let want = d.as_secs() as f64 * 1e3 + f64::from(d.subsec_nanos()) / 1e6;
                let got = parse_rfc3339_ms(&text);
                proptest::prop_assert!(got.is_some_and(|g| (g - want).abs() < 0.01), "{text}: {got:?} vs {want}");
            }
        }

        /// An offset (which humantime does not read) names the UTC instant it is shifted from.
        #[test]
        fn rfc3339_offsets_shift_to_utc(
            secs in 0u64..250_000_000_000,
            nanos in 0u32..1_000_000_000,
            offset_min in -1439i64..=1439,
        ) {
            let utc = std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
            let shift = std::time::Duration::from_secs(offset_min.unsigned_abs() * 60);
            let local = if offset_min >= 0 { utc + shift } else { utc - shift };
            let (sign, m) = (if offset_min >= 0 { '+' } else { '-' }, offset_min.unsigned_abs());
            let text = humantime::format_rfc3339_nanos(local).to_string().replace('Z', "")
                + &format!("{sign}{:02}:{:02}", m / 60, m % 60);
            let want = secs as f64 * 1e3 + f64::from(nanos) / 1e6;
            let got = parse_rfc3339_ms(&text);
            proptest::prop_assert!(got.is_some_and(|g| (g - want).abs() < 0.01), "{text}: {got:?} vs {want}");
        }
    }

    #[test]
    fn metadata_resolves_endpoints_and_refreshes_before_expiry() {
        let body = br#"{"version":2,"databaseId":"00000000-0000-0000-0000-000000000000",
            "endpoints":[{"url":"/v2","consistency":"strong"},
                         {"url":"https://replica.example.com/v2/","consistency":"eventual"},
                         {"url":"/x","consistency":"quantum"}],
            "token":"t0ken-abc","expiresAt":"1970-01-01T01:00:00Z"}"#;
        let m = parse_metadata(body, "http://127.0.0.1:4512/", 0.0, ("u".into(), 1)).unwrap();
        assert_eq!(m.strong, ["http://127.0.0.1:4512/v2"]);
        assert_eq!(m.eventual, ["https://replica.example.com/v2"]);
        assert_eq!(m.expires_at_ms, 3_600_000.0);
        assert_eq!(m.refresh_at_ms, 3_540_000.0);
        assert_eq!(
            m.read_endpoint(Consistency::Strong),
            "http://127.0.0.1:4512/v2"
        );
        assert_eq!(
            m.read_endpoint(Consistency::Eventual),
            "https://replica.example.com/v2"
        );
        assert!(!format!("{m:?}").contains("t0ken"));
        // A short-lived token is refreshed at half its lifetime.
        let m = parse_metadata(body, "http://h/", 3_590_000.0, ("u".into(), 1)).unwrap();
        assert_eq!(m.refresh_at_ms, 3_595_000.0);
    }

    #[test]
    fn bad_metadata_is_a_decode_error() {
        let cases: [&[u8]; 5] = [
            b"not json",
            br#"{"version":9,"databaseId":"x","endpoints":[{"url":"/v2","consistency":"strong"}],"token":"t","expiresAt":"2023-10-01T00:00:00Z"}"#,
            br#"{"version":2,"databaseId":"x","endpoints":[{"url":"/v2","consistency":"eventual"}],"token":"t","expiresAt":"2023-10-01T00:00:00Z"}"#,
            br#"{"version":2,"databaseId":"x","endpoints":[{"url":"/v2","consistency":"strong"}],"token":"t","expiresAt":"tomorrow"}"#,
            br#"{"version":2,"endpoints":[],"token":"data-path-secret-7f3a","expiresAt":"2023-10-01T00:00:00Z"}"#,
        ];
        for body in cases {
            let e = parse_metadata(body, "http://h/", 0.0, ("u".into(), 1)).unwrap_err();
            assert_eq!(
                e.kind,
                ErrorKind::Decode,
                "{}",
                String::from_utf8_lossy(body)
            );
            // A JSON answer carries a live data-path token: it must never be quoted.
            assert!(!e.message.contains("data-path-secret"), "{}", e.message);
            assert!(!e.message.contains("\"t\""), "{}", e.message);
        }
    }
}
