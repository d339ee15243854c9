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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: &'static str,
    pub url: String,
    /// Header pairs. May carry credentials: never log or echo a request.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    /// The whole body, fully read.
    pub body: Vec<u8>,
}

/// Sends one request and reads the whole response body. Dropping the returned future must
/// abandon (and where the platform allows, abort) the request: that is how timeouts cancel.
#[async_trait(?Send)]
pub trait HttpTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, StoreError>;
}
