//! Store failures as data: a failed read or write becomes an `error` object in the answer,
//! never an HTTP 500, so one broken backend cannot hide the numbers of the others.

use serde::Serialize;

/// A parameter that failed validation; `parameter` is the query parameter (or `[vars]` name).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("invalid parameter `{parameter}`: {message}")]
pub struct ParamError {
    pub parameter: String,
    pub message: String,
}

impl ParamError {
    pub fn new(parameter: &str, message: impl Into<String>) -> Self {
        Self {
            parameter: parameter.to_string(),
            message: message.into(),
        }
    }
}

/// What went wrong, in a small closed vocabulary that load tools can count by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The store did not answer within the per-store timeout; the call was abandoned.
    Timeout,
    /// The store refused our credentials (HTTP 401/403).
    Auth,
    /// The store answered with an unexpected HTTP status, or reported a command error.
    Http,
    /// The store answered, but not with the shape we expect (e.g. not JSON).
    Decode,
    /// The store throttled us (HTTP 429).
    RateLimited,
    /// The store is not configured in this deployment (missing binding, URL or token).
    NotConfigured,
    /// The platform failed the call (network error, binding exception, ...).
    Runtime,
    /// A TCP store's connection could not be opened or upgraded to TLS, or was lost mid-exchange.
    Connect,
    /// A TCP server spoke something other than the store's protocol, or broke it (an unknown
    /// message, one over the size limit); `decode` is an HTTP store's unexpected body.
    Protocol,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Auth => "auth",
            ErrorKind::Http => "http",
            ErrorKind::Decode => "decode",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::NotConfigured => "not_configured",
            ErrorKind::Runtime => "runtime",
            ErrorKind::Connect => "connect",
            ErrorKind::Protocol => "protocol",
        }
    }
}

/// A failed store operation. The message is meant for humans and must never contain a secret:
/// constructors take already-sanitised text and [`StoreError::http_status`] truncates bodies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct StoreError {
    pub kind: ErrorKind,
    pub message: String,
}

/// Longest piece of a foreign response body we quote in an error message.
const MAX_QUOTE_BYTES: usize = 200;

impl StoreError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Classifies a non-success HTTP status; `detail` is the store's own error text, if any.
    pub fn http_status(status: u16, detail: &str) -> Self {
        let kind = match status {
            401 | 403 => ErrorKind::Auth,
            429 => ErrorKind::RateLimited,
            _ => ErrorKind::Http,
        };
        let detail = quote(detail);
        let message = if detail.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {detail}")
        };
        Self::new(kind, message)
    }
}

/// The kind of an error a binding raised, from its text: workerd's `KV <METHOD> failed: <status>
/// ...` is classified as an HTTP status; anything else is the platform failing the call.
pub fn classify_binding_error(text: &str) -> ErrorKind {
    let status = text.split_once(" failed: ").and_then(|(_, rest)| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u16>().ok()
    });
    match status {
        Some(401 | 403) => ErrorKind::Auth,
        Some(429) => ErrorKind::RateLimited,
        Some(400..=599) => ErrorKind::Http,
        _ => ErrorKind::Runtime,
    }
}

/// Shortens foreign text to a readable, bounded quote (on a char boundary).
pub fn quote(text: &str) -> String {
    let text = text.trim();
    if text.len() <= MAX_QUOTE_BYTES {
        return text.to_string();
    }
    let mut end = MAX_QUOTE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // `get`, not `[..end]`: no slicing on the request path, even where it cannot panic.
    format!("{}…", text.get(..end).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_errors_table() {
        let cases = [
            (
                "Error: KV PUT failed: 429 Too Many Requests",
                ErrorKind::RateLimited,
            ),
            ("KV GET failed: 401 Unauthorized", ErrorKind::Auth),
            (
                "KV PUT failed: 414 UTF-8 encoded length of 600 exceeds",
                ErrorKind::Http,
            ),
            ("KV GET failed: 503 Service Unavailable", ErrorKind::Http),
            ("TypeError: Key name cannot be empty.", ErrorKind::Runtime),
            ("Network connection lost.", ErrorKind::Runtime),
            ("KV PUT failed: soon", ErrorKind::Runtime),
        ];
        for (text, kind) in cases {
            assert_eq!(classify_binding_error(text), kind, "{text}");
        }
    }

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(StoreError::http_status(401, "").kind, ErrorKind::Auth);
        assert_eq!(StoreError::http_status(403, "x").kind, ErrorKind::Auth);
        assert_eq!(
            StoreError::http_status(429, "").kind,
            ErrorKind::RateLimited
        );
        assert_eq!(StoreError::http_status(500, "boom").kind, ErrorKind::Http);
        assert_eq!(
            StoreError::http_status(500, "boom").message,
            "HTTP 500: boom"
        );
        assert_eq!(StoreError::http_status(502, " ").message, "HTTP 502");
    }

    #[test]
    fn long_quotes_are_cut_on_char_boundaries() {
        let long = "é".repeat(300);
        let q = quote(&long);
        assert!(q.len() <= MAX_QUOTE_BYTES + "…".len());
        assert!(q.ends_with('…'));
    }
}
