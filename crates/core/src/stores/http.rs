//! The HTTP transport seam: REST stores (Upstash, later Deno KV) speak through this trait, which
//! the worker implements with `fetch` and tests implement with scripted responses.

use async_trait::async_trait;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};

use crate::error::StoreError;

/// What a key must escape to be one URL path segment: everything but the unreserved characters
/// (`A–Z a–z 0–9 - . _ ~`), so `/`, `?`, `#`, `%` and `:` never change the URL's shape.
pub const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why a store's URL does not parse (never quoting it: it may hold a password). Host names are
/// ASCII only (`url` is built without IDNA, docs/measured.md): give punycode.
pub fn url_unparsable(e: url::ParseError) -> &'static str {
    match e {
        url::ParseError::IdnaError => NOT_ASCII_HOST,
        _ => "it does not parse",
    }
}

/// The socket host of a `redis://` or `postgres://` URL (IPv6 unbracketed); refused when absent
/// or not ASCII.
pub fn socket_host(url: &url::Url) -> Result<String, &'static str> {
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or("it has no host")?;
    if host.contains('%') {
        return Err(NOT_ASCII_HOST);
    }
    Ok(host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string())
}

/// A store URL's host name that is not ASCII.
pub const NOT_ASCII_HOST: &str = "its host name is not ASCII: give it in its punycode form (xn--…)";

/// The largest response body a store's call reads: a 1 MiB value base64'd in JSON or framed in
/// protobuf, with room. Longer announced is refused unread; unannounced is cut here.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// The failure of a response body over [`MAX_RESPONSE_BYTES`] (`announced`: the length its
/// `Content-Length` gave, if any).
pub fn body_too_large(announced: Option<u64>) -> StoreError {
    let limit = MAX_RESPONSE_BYTES >> 20;
    StoreError::new(
        crate::error::ErrorKind::Protocol,
        match announced {
            Some(n) => format!("a response body of {n} bytes: over the {limit} MiB limit"),
            None => format!("a response body over the {limit} MiB limit: cut there"),
        },
    )
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    pub method: &'static str,
    pub url: String,
    /// Header pairs. May carry credentials: never log or echo a request.
    pub headers: Vec<(String, String)>,
    /// The body, unless it is `prepared`.
    pub body: Vec<u8>,
    /// The body as the transport took it ahead of the request ([`HttpTransport::prepare`]);
    /// `body` is then empty.
    pub prepared: Option<PreparedBody>,
}

/// A request body the transport holds on its own side (the worker: a JS `Uint8Array`).
#[derive(Clone)]
pub struct PreparedBody(pub std::rc::Rc<dyn std::any::Any>);

impl PartialEq for PreparedBody {
    fn eq(&self, other: &PreparedBody) -> bool {
        std::rc::Rc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for PreparedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreparedBody")
    }
}

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// The whole body, fully read.
    pub body: Body,
}

/// A response body, read whole. The worker's stays a JS `ArrayBuffer` until its bytes are asked
/// for, so a large hit is copied into wasm only after every span (and wasm memory, which only
/// grows, does not hold it across the request).
pub struct Body {
    len: usize,
    outside: Option<Box<dyn OutsideBody>>,
    bytes: std::cell::OnceCell<Vec<u8>>,
}

/// A body still on the platform's side.
pub trait OutsideBody {
    /// Its bytes, copied in.
    fn copy_in(&self) -> Vec<u8>;
    /// Bytes `start..end` of it, copied in (within its length).
    fn copy_range(&self, start: usize, end: usize) -> Vec<u8>;
}

impl Body {
    /// A body whose bytes are already here.
    pub fn new(bytes: Vec<u8>) -> Body {
        Body {
            len: bytes.len(),
            outside: None,
            bytes: std::cell::OnceCell::from(bytes),
        }
    }

    /// A body of `len` bytes still on the platform's side.
    pub fn outside(len: usize, body: Box<dyn OutsideBody>) -> Body {
        Body {
            len,
            outside: Some(body),
            bytes: std::cell::OnceCell::new(),
        }
    }

    /// Its length, without copying it in.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its bytes, copied in on first use.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.get_or_init(|| match &self.outside {
            Some(body) => body.copy_in(),
            None => Vec::new(),
        })
    }

    /// Bytes `start..end` (clamped to the body), copying in only those when the body is still
    /// outside.
    pub fn range(&self, start: usize, end: usize) -> Vec<u8> {
        let end = end.min(self.len);
        let start = start.min(end);
        match (self.bytes.get(), &self.outside) {
            (Some(bytes), _) => bytes.get(start..end).unwrap_or_default().to_vec(),
            (None, Some(body)) => body.copy_range(start, end),
            (None, None) => Vec::new(),
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        Body::new(bytes)
    }
}

impl std::ops::Deref for Body {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Body({} bytes)", self.len)
    }
}

/// Sends one request and reads the whole response body. Dropping the returned future must
/// abandon (and where the platform allows, abort) the request: that is how timeouts cancel.
#[async_trait(?Send)]
pub trait HttpTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError>;

    /// Takes a request body ahead of its request, before any span (the worker copies it into a
    /// JS `Uint8Array`). `None`: the bytes travel with the request.
    fn prepare(&self, _body: &[u8]) -> Option<PreparedBody> {
        None
    }

    /// [`HttpTransport::prepare`] for a body that is exactly `value`: the worker uses the JS copy
    /// kept with the value (`Value::outside`), so such a body costs no copy at all.
    fn prepare_value(&self, value: &crate::stores::value::Value) -> Option<PreparedBody> {
        self.prepare(value.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unicode host names are refused with what to do instead (the `idna_adapter` pin); their
    /// punycode form parses. (A mixed-case Unicode host trips a `debug_assert!` of
    /// `idna_adapter` 1.0.0 in debug builds; the worker is a release build.)
    #[test]
    fn a_unicode_host_name_is_refused_by_name() {
        let e = url::Url::parse("https://b\u{fc}cher.example/").unwrap_err();
        assert_eq!(url_unparsable(e), NOT_ASCII_HOST);
        let u = url::Url::parse("https://xn--bcher-kva.example/").unwrap();
        assert_eq!(u.host_str(), Some("xn--bcher-kva.example"));
        assert_eq!(
            url_unparsable(url::Url::parse("nope").unwrap_err()),
            "it does not parse"
        );
    }
}
