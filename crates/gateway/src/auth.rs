//! Bearer-token checks for the REST routes and the admin route: constant-time, and the token is
//! never echoed or logged.

use axum::http::{header, HeaderMap, Uri};
use percent_encoding::percent_decode_str;
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// The token a request presents: `Authorization: Bearer <token>`, else the `_token` query parameter.
pub fn presented_token(headers: &HeaderMap, uri: &Uri) -> Option<Vec<u8>> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.as_bytes();
        if value.len() > 7 && value[..7].eq_ignore_ascii_case(b"bearer ") {
            return Some(value[7..].trim_ascii().to_vec());
        }
    }
    uri.query()?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "_token")
        .map(|(_, value)| percent_decode_str(value).collect())
}

/// Whether `presented` equals `expected`, in time that does not depend on where they differ.
pub fn token_matches(presented: &[u8], expected: &[u8]) -> bool {
    presented.ct_eq(expected).into()
}

/// Checks a request against `expected`; the error never contains either token.
pub fn check(headers: &HeaderMap, uri: &Uri, expected: &[u8]) -> Result<(), ApiError> {
    match presented_token(headers, uri) {
        None => Err(ApiError::unauthorized("Unauthorized: missing token")),
        Some(token) if token_matches(&token, expected) => Ok(()),
        Some(_) => Err(ApiError::unauthorized("Unauthorized: invalid token")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(a).unwrap());
        }
        h
    }

    #[test]
    fn token_comes_from_bearer_header_or_query() {
        let uri: Uri = "/get/k".parse().unwrap();
        assert_eq!(
            presented_token(&headers(Some("Bearer abc")), &uri),
            Some(b"abc".to_vec())
        );
        assert_eq!(
            presented_token(&headers(Some("bearer  abc ")), &uri),
            Some(b"abc".to_vec())
        );
        assert_eq!(presented_token(&headers(Some("Basic abc")), &uri), None);
        let uri: Uri = "/get/k?x=1&_token=a%3Db".parse().unwrap();
        assert_eq!(presented_token(&headers(None), &uri), Some(b"a=b".to_vec()));
    }

    #[test]
    fn check_distinguishes_missing_and_wrong_without_echoing() {
        let uri: Uri = "/".parse().unwrap();
        assert!(check(&headers(Some("Bearer secret")), &uri, b"secret").is_ok());
        let missing = check(&headers(None), &uri, b"secret").unwrap_err();
        assert_eq!(missing.status, 401);
        let wrong = check(&headers(Some("Bearer guess")), &uri, b"secret").unwrap_err();
        assert_eq!(wrong.status, 401);
        assert!(!wrong.message.contains("guess") && !wrong.message.contains("secret"));
        assert!(!token_matches(b"secre", b"secret"));
    }
}
