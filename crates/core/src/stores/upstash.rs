//! Upstash Redis over its REST API: one `POST` per operation. A read is `["GET", key]` with
//! `Upstash-Encoding: base64` (as the official client), so `value_bytes` is the stored length; a
//! write is the documented binary form `POST /set/<key>?EX=<ttl>` with the raw value as body.

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::error::{quote, ErrorKind, StoreError};
use crate::stores::http::{HttpRequest, HttpResponse, HttpTransport};
use crate::stores::secret::redact;
use crate::stores::store::{Deferred, Fetched, Options, Store};
use crate::stores::value::Value as WriteValue;

/// Answers up to this size are decoded at once (they decide whether a write follows); larger
/// ones can only be a hit and are decoded after every span.
const DECODE_NOW_BYTES: usize = 256;

/// Upstash REST endpoint and credentials (`UPSTASH_REDIS_REST_URL`, `UPSTASH_REDIS_REST_TOKEN`).
pub struct UpstashStore<T> {
    url: String,
    token: String,
    transport: T,
}

impl<T: HttpTransport> UpstashStore<T> {
    pub fn new(url: impl Into<String>, token: impl Into<String>, transport: T) -> Self {
        Self {
            url: url.into(),
            token: token.into(),
            transport,
        }
    }

    /// The request for one command, exactly as sent.
    pub fn request(&self, command: &Value) -> HttpRequest {
        HttpRequest {
            method: "POST",
            url: self.url.clone(),
            headers: vec![
                ("Authorization".into(), format!("Bearer {}", self.token)),
                ("Content-Type".into(), "application/json".into()),
            ],
            body: command.to_string().into_bytes(),
            prepared: None,
        }
    }

    /// The `GET` request: results come back base64-encoded.
    pub fn get_request(&self, key: &str) -> HttpRequest {
        let mut request = self.request(&json!(["GET", key]));
        request
            .headers
            .push(("Upstash-Encoding".into(), "base64".into()));
        request
    }

    /// The `SET` of `value` under `key` for `ttl_s` seconds, exactly as sent: `POST
    /// <url>/set/<key>?EX=<ttl>`, the value as the raw body (or as the transport took it).
    pub fn set_request(&self, key: &str, value: &WriteValue, ttl_s: u32) -> HttpRequest {
        let key = percent_encoding::utf8_percent_encode(key, crate::stores::http::PATH_SEGMENT);
        let prepared = self.transport.prepare_value(value);
        HttpRequest {
            method: "POST",
            url: format!("{}/set/{key}?EX={ttl_s}", self.url.trim_end_matches('/')),
            headers: vec![("Authorization".into(), format!("Bearer {}", self.token))],
            body: match prepared {
                Some(_) => Vec::new(),
                None => value.bytes().to_vec(),
            },
            prepared,
        }
    }

    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError> {
        self.transport
            .send(request)
            .await
            .map_err(|e| self.redact(e))
    }

    fn redact(&self, error: StoreError) -> StoreError {
        without_token(&self.token, error)
    }
}

/// Belt and braces: no message leaves this store with the token in it, whatever a server echoes.
fn without_token(token: &str, mut error: StoreError) -> StoreError {
    error.message = redact(&error.message, &[token]);
    error
}

/// Decodes an Upstash REST answer into its `result`, or a classified error. Foreign text quoted in
/// an error has every one of `secrets` redacted first.
pub fn decode(response: &HttpResponse, secrets: &[&str]) -> Result<Value, StoreError> {
    let body_text = || redact(&String::from_utf8_lossy(&response.body), secrets);
    let parsed: Option<Value> = serde_json::from_slice(&response.body).ok();
    let error_text = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(Value::as_str)
        .map(|text| redact(text, secrets));
    if !(200..300).contains(&response.status) {
        let detail = error_text.unwrap_or_else(body_text);
        return Err(StoreError::http_status(response.status, &detail));
    }
    let Some(Value::Object(mut object)) = parsed else {
        return Err(StoreError::new(
            ErrorKind::Decode,
            format!("expected a JSON object, got {:?}", quote(&body_text())),
        ));
    };
    if let Some(text) = error_text {
        return Err(StoreError::new(ErrorKind::Http, quote(&text)));
    }
    object.remove("result").ok_or_else(|| {
        StoreError::new(ErrorKind::Decode, "answer has neither `result` nor `error`")
    })
}

/// Standard base64's alphabet (padding apart), by byte.
#[allow(clippy::indexing_slicing)] // c < 256, evaluated at compile time
const BASE64: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
        c += 1;
    }
    t
};

fn is_base64(b: u8) -> bool {
    #[allow(clippy::indexing_slicing)] // a u8 indexes a 256-entry table
    BASE64[usize::from(b)]
}

/// Whether all 8 bytes of `w` are in base64's alphabet, a word at a time (SWAR): for a byte
/// `b < 0x80`, `b + (0x80 - lo)` sets the byte's top bit exactly when `b >= lo`, and
/// `b + (0x7F - hi)` when `b > hi`; no sum leaves its byte, so the 8 lanes are checked at once.
fn base64_word(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOP: u64 = 0x8080_8080_8080_8080;
    if w & TOP != 0 {
        return false;
    }
    let range = |lo: u8, hi: u8| {
        let at_least = w + ONES * u64::from(0x80 - lo);
        let above = w + ONES * u64::from(0x7F - hi);
        at_least & !above & TOP
    };
    let ok = range(b'A', b'Z')
        | range(b'a', b'z')
        | range(b'0', b'9')
        | range(b'+', b'+')
        | range(b'/', b'/');
    ok == TOP
}

/// The decoded size of padded base64 from its length, every byte checked to be in the alphabet
/// (nothing decoded or copied); `None` when it is not base64.
pub fn base64_decoded_len(text: &[u8]) -> Option<u64> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let pad = text.iter().rev().take_while(|b| **b == b'=').count();
    if pad > 2 {
        return None;
    }
    let body = text.get(..text.len() - pad)?;
    // Whole words as arrays, not slices copied into one: at the worker's size-optimising
    // `opt-level = "s"` that copy stayed a call per 8 bytes (docs/measured.md).
    let (words, rest) = body.as_chunks::<8>();
    if !words.iter().all(|w| base64_word(u64::from_le_bytes(*w)))
        || !rest.iter().copied().all(is_base64)
    {
        return None;
    }
    Some((text.len() / 4 * 3 - pad) as u64)
}

/// A `GET` answer's stored size when it is exactly `{"result":"<base64>"}` (no JSON escapes
/// possible) or `{"result":null}`; `None`: another shape, for the full path.
fn fast_get_size(body: &[u8]) -> Option<Option<u64>> {
    if body == br#"{"result":null}"# {
        return Some(None);
    }
    let b64 = body
        .strip_prefix(br#"{"result":""#)?
        .strip_suffix(br#""}"#)?;
    base64_decoded_len(b64).map(Some)
}

/// A large `GET` answer's stored size from its shape alone (15 bytes copied, whatever the size);
/// the alphabet is checked only when [`full_check_due`] says. `None`: the full path.
fn shape_get_size(body: &crate::stores::http::Body) -> Option<u64> {
    const HEAD: &[u8] = br#"{"result":""#;
    const TAIL: &[u8] = br#""}"#;
    let len = body.len();
    let b64 = len.checked_sub(HEAD.len() + TAIL.len())?;
    if b64 < 4 || !b64.is_multiple_of(4) || body.range(0, HEAD.len()) != HEAD {
        return None;
    }
    let tail = body.range(len - 4, len);
    let (last, end) = tail.split_at_checked(2)?;
    if end != TAIL {
        return None;
    }
    let pad = match last {
        [b'=', b'='] => 2,
        [a, b'='] if is_base64(*a) => 1,
        [a, b] if is_base64(*a) && is_base64(*b) => 0,
        _ => return None,
    };
    Some((b64 / 4 * 3 - pad) as u64)
}

/// Every this many large hits of an isolate, and on its first, a hit's base64 is checked in
/// full: base64 encoding is the deployment's property, so once shown, shape and length suffice.
pub const FULL_CHECK_EVERY: u64 = 64;

thread_local! {
    static LARGE_HITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Whether this isolate's next large hit is checked in full (counts it).
fn full_check_due() -> bool {
    LARGE_HITS.with(|hits| {
        let n = hits.get();
        hits.set(n.wrapping_add(1));
        n.is_multiple_of(FULL_CHECK_EVERY)
    })
}

/// The stored size of a base64 `GET` result.
fn get_result(result: Value) -> Result<Option<u64>, StoreError> {
    match result {
        Value::Null => Ok(None),
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map(|bytes| Some(bytes.len() as u64))
            .map_err(|_| {
                StoreError::new(
                    ErrorKind::Decode,
                    "GET result is not base64 (was Upstash-Encoding: base64 honoured?)",
                )
            }),
        other => Err(StoreError::new(
            ErrorKind::Decode,
            format!(
                "GET result is not a string or null: {}",
                quote(&other.to_string())
            ),
        )),
    }
}

#[async_trait(?Send)]
impl<T: HttpTransport> Store for UpstashStore<T> {
    type Prepared = HttpRequest;

    async fn get(&self, key: &str, _options: &Options) -> Result<Fetched, StoreError> {
        let response = self.send(self.get_request(key)).await?;
        let token = self.token.clone();
        let size = move |response: &HttpResponse| {
            // The common answer is sized from the base64's length; anything else takes the
            // full path, which also words the errors.
            if let Some(sized) = fast_get_size(&response.body) {
                return Ok(sized);
            }
            decode(response, &[&token])
                .and_then(get_result)
                .map_err(|e| without_token(&token, e))
        };
        let ok = (200..300).contains(&response.status);
        if !ok || response.body.len() <= DECODE_NOW_BYTES {
            return Ok(match size(&response)? {
                None => Fetched::Miss,
                Some(bytes) => Fetched::Hit(Deferred::ready(bytes)),
            });
        }
        // A large answer is a hit. Mostly it is sized from its shape at once (nothing copied,
        // nothing held); a full check (or an unusual shape) copies it in after every span.
        if !full_check_due() {
            if let Some(bytes) = shape_get_size(&response.body) {
                return Ok(Fetched::Hit(Deferred::ready(bytes)));
            }
        }
        Ok(Fetched::Hit(Deferred::later(move || {
            size(&response)?.ok_or_else(|| {
                StoreError::new(ErrorKind::Decode, "a large GET answer decoded to null")
            })
        })))
    }

    /// The `SET` request, its body as the transport took it ([`Self::set_request`]).
    fn prepare(
        &self,
        key: &str,
        value: &WriteValue,
        ttl_s: u32,
    ) -> Result<HttpRequest, StoreError> {
        Ok(self.set_request(key, value, ttl_s))
    }

    async fn put(
        &self,
        _key: &str,
        _ttl_s: u32,
        request: HttpRequest,
        _options: &Options,
    ) -> Result<(), StoreError> {
        let response = self.send(request).await?;
        match decode(&response, &[&self.token]).map_err(|e| self.redact(e))? {
            Value::String(s) if s == "OK" => Ok(()),
            other => Err(StoreError::new(
                ErrorKind::Decode,
                format!("SET result is not \"OK\": {}", quote(&other.to_string())),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_the_raw_body_form_with_its_key_escaped() {
        let store = UpstashStore::new("https://x/", "t", NoTransport);
        let v = WriteValue::from_bytes(b"a\"b\xff".to_vec());
        let r = store.set_request("k/1 ?#:", &v, 60);
        assert_eq!(r.method, "POST");
        assert_eq!(r.url, "https://x/set/k%2F1%20%3F%23%3A?EX=60");
        assert_eq!(r.body, v.bytes(), "the value itself, byte for byte");
        assert_eq!(r.prepared, None);
        assert_eq!(
            r.headers,
            vec![("Authorization".to_string(), "Bearer t".to_string())]
        );
        assert_eq!(
            store.prepare("k/1 ?#:", &v, 60).unwrap(),
            r,
            "the write sends it"
        );
    }

    struct NoTransport;

    #[async_trait(?Send)]
    impl HttpTransport for NoTransport {
        async fn send(&self, _: HttpRequest) -> Result<HttpResponse, StoreError> {
            unreachable!("encoding only")
        }
    }

    #[test]
    fn the_word_check_agrees_with_the_byte_check_on_every_byte() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut lanes = *b"AAAAAAAA";
                lanes[at] = b;
                assert_eq!(
                    base64_word(u64::from_le_bytes(lanes)),
                    is_base64(b),
                    "byte {b:#04x} at {at}"
                );
            }
        }
    }

    #[test]
    fn base64_sizes_follow_from_the_length() {
        use base64::Engine as _;
        for len in [0usize, 1, 2, 3, 4, 5, 1000, 65_536, 65_537] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            assert_eq!(
                base64_decoded_len(b64.as_bytes()),
                Some(len as u64),
                "{len}"
            );
            let body = format!("{{\"result\":\"{b64}\"}}");
            assert_eq!(fast_get_size(body.as_bytes()), Some(Some(len as u64)));
            let shaped = (len > 0).then_some(len as u64);
            assert_eq!(
                shape_get_size(&body.clone().into_bytes().into()),
                shaped,
                "{len}"
            );
        }
        for odd in [
            r#"{"result":"abcde"}"#,
            r#"{"result":"ab=c"}"#,
            r#"{"result":"abc-"}"#,
            r#"{"result":"abcd"]"#,
            r#"{"error":"abcdefgh"}"#,
        ] {
            assert_eq!(
                shape_get_size(&odd.as_bytes().to_vec().into()),
                None,
                "{odd}"
            );
        }
        assert_eq!(fast_get_size(br#"{"result":null}"#), Some(None));
        for bad in ["abc", "ab=c", "a===", "abc-", "abc_", "ab c"] {
            assert_eq!(base64_decoded_len(bad.as_bytes()), None, "{bad}");
        }
        // Not the usual shape: left to the full path (which words the error).
        for other in [
            r#"{"error":"ERR x"}"#,
            r#"{"result":5}"#,
            r#"{"result":"abc-"}"#,
            "nope",
        ] {
            assert_eq!(fast_get_size(other.as_bytes()), None, "{other}");
        }
    }

    /// Answers every request with the same body.
    struct Fixed(String);

    #[async_trait(?Send)]
    impl HttpTransport for Fixed {
        async fn send(&self, _: HttpRequest) -> Result<HttpResponse, StoreError> {
            Ok(HttpResponse {
                status: 200,
                body: self.0.clone().into_bytes().into(),
            })
        }
    }

    #[test]
    fn an_isolates_first_large_hit_and_every_64th_are_checked_byte_for_byte() {
        // The shape of base64 but not its alphabet: what a server ignoring Upstash-Encoding
        // could send for one of our values. The full check refuses it; the shape check cannot.
        let body = format!("{{\"result\":\"{}abcd\"}}", "ab-_".repeat(99));
        let store = UpstashStore::new("http://x", "t", Fixed(body));
        let read = || {
            let fetched = futures::executor::block_on(store.get("k", &Options::default()));
            match fetched.unwrap() {
                Fetched::Hit(d) => d.finish().map_err(|e| e.kind),
                Fetched::Miss => panic!("a miss"),
            }
        };
        assert_eq!(
            read(),
            Err(ErrorKind::Decode),
            "the first large hit: full check"
        );
        for i in 1..FULL_CHECK_EVERY {
            assert_eq!(read(), Ok(300), "hit {i}: by shape");
        }
        assert_eq!(read(), Err(ErrorKind::Decode), "hit 64: full check again");
    }

    #[test]
    fn get_results_are_sized_as_stored() {
        assert_eq!(get_result(Value::Null), Ok(None));
        // 1,000 bytes of 0xFF (not UTF-8) as base64: 1,000 bytes, not 3,000 U+FFFD bytes.
        let b64 = base64::engine::general_purpose::STANDARD.encode([0xFFu8; 1000]);
        assert_eq!(get_result(json!(b64)), Ok(Some(1000)));
        assert_eq!(
            get_result(json!("not base64!")).unwrap_err().kind,
            ErrorKind::Decode
        );
        assert_eq!(get_result(json!(3)).unwrap_err().kind, ErrorKind::Decode);
    }

    fn resp(status: u16, body: &str) -> HttpResponse {
        HttpResponse {
            status,
            body: body.as_bytes().to_vec().into(),
        }
    }

    #[test]
    fn decode_table() {
        assert_eq!(
            decode(&resp(200, r#"{"result":null}"#), &[]),
            Ok(Value::Null)
        );
        assert_eq!(decode(&resp(200, r#"{"result":"v"}"#), &[]), Ok(json!("v")));
        let cases = [
            (
                resp(400, r#"{"error":"ERR syntax"}"#),
                ErrorKind::Http,
                "HTTP 400: ERR syntax",
            ),
            (
                resp(401, r#"{"error":"Unauthorized"}"#),
                ErrorKind::Auth,
                "HTTP 401: Unauthorized",
            ),
            (
                resp(429, "slow down"),
                ErrorKind::RateLimited,
                "HTTP 429: slow down",
            ),
            (
                resp(500, "<html>oops</html>"),
                ErrorKind::Http,
                "HTTP 500: <html>oops</html>",
            ),
            (
                resp(200, "not json"),
                ErrorKind::Decode,
                "expected a JSON object, got \"not json\"",
            ),
            (
                resp(200, "[1]"),
                ErrorKind::Decode,
                "expected a JSON object, got \"[1]\"",
            ),
            (
                resp(200, "{}"),
                ErrorKind::Decode,
                "answer has neither `result` nor `error`",
            ),
            (
                resp(200, r#"{"error":"WRONGTYPE"}"#),
                ErrorKind::Http,
                "WRONGTYPE",
            ),
        ];
        for (r, kind, message) in cases {
            let e = decode(&r, &[]).unwrap_err();
            assert_eq!((e.kind, e.message.as_str()), (kind, message));
        }
    }
}
