//! Store failures as data: a failed read or write becomes an `error` object in the answer,
//! never an HTTP 500, so one broken backend cannot hide the numbers of the others.

use serde::Serialize;

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

/// The kind of an error a Workers binding raised, from its text. workerd's KV binding throws
/// `KV <METHOD> failed: <status> <status text>` for a non-2xx answer of the KV service (e.g.
/// `KV PUT failed: 429 Too Many Requests` when a key is written more than once a second), so the
/// status is classified like an HTTP store's; anything else is the platform failing the call.
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

/// Replaces every occurrence of a secret in foreign text, in each form a server might echo it
/// ([`secret_forms`]). Runs on the whole text *before* it is shortened by [`quote`], so a secret
/// cut in half by the shortening cannot survive as a prefix.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        for form in secret_forms(secret) {
            if out.contains(&form) {
                out = out.replace(&form, "[redacted]");
            }
        }
    }
    out
}

/// The shortest base64 run worth redacting: shorter ones would match innocent text.
const MIN_BASE64_FORM: usize = 6;

/// `secret` as a server might echo it: verbatim; percent-encoded (every byte but letters and
/// digits, or only what a URL path must escape; upper- and lower-case hex); and base64 (standard
/// and URL-safe alphabets) at each of the three alignments it can have inside a longer encoded
/// text (a `user:password` pair, say) — the characters that also depend on the bytes around it
/// left out, so every form is a substring of any encoding that contains the secret.
pub fn secret_forms(secret: &str) -> Vec<String> {
    use base64::Engine;
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let mut forms = vec![secret.to_string()];
    for set in [NON_ALPHANUMERIC, crate::http::PATH_SEGMENT] {
        let upper = utf8_percent_encode(secret, set).to_string();
        forms.push(upper.to_lowercase_hex());
        forms.push(upper);
    }
    let engines = [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    for engine in engines {
        for offset in 0..3usize {
            let mut bytes = vec![0u8; offset];
            bytes.extend_from_slice(secret.as_bytes());
            let encoded = engine.encode(&bytes);
            // Characters carrying bits of the padding before it, and of whatever follows it.
            let skip = (offset * 8).div_ceil(6);
            let keep_end = if bytes.len() % 3 == 0 {
                encoded.len()
            } else {
                encoded.len().saturating_sub(1)
            };
            if let Some(core) = encoded.get(skip..keep_end) {
                if core.len() >= MIN_BASE64_FORM {
                    forms.push(core.to_string());
                }
            }
        }
    }
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    forms
}

/// Percent-encoded text with its hex digits in lower case (`%2f`), as some servers write it.
trait LowercaseHex {
    fn to_lowercase_hex(&self) -> String;
}

impl LowercaseHex for String {
    fn to_lowercase_hex(&self) -> String {
        let mut out = String::with_capacity(self.len());
        let mut left = 0u8;
        for c in self.chars() {
            if c == '%' {
                left = 2;
                out.push(c);
            } else if left > 0 {
                left -= 1;
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
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
    fn secrets_are_redacted_before_the_quote_cuts_them() {
        let secret = "tok-0123456789abcdef";
        let text = format!("{}Bearer {secret} tail", "x".repeat(195));
        let q = quote(&redact(&text, &[secret, ""]));
        assert!(!q.contains("tok-0123"), "{q}");
        assert_eq!(redact("no secret here", &[secret]), "no secret here");
    }

    #[test]
    fn a_secret_is_redacted_in_every_form_a_server_echoes_it() {
        use base64::Engine;
        let secret = "p@ss/w0rd:é+?x";
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let b64url = |t: &str| base64::engine::general_purpose::URL_SAFE.encode(t);
        let echoes = [
            format!("password {secret} rejected"),
            "user=p%40ss%2Fw0rd%3A%C3%A9%2B%3Fx".to_string(),
            "user=p%40ss%2fw0rd%3a%c3%a9%2b%3fx".to_string(),
            "url: postgres://u:p%40ss%2Fw0rd%3A%C3%A9%2B%3Fx@h/db".to_string(),
            format!("basic {}", b64(&format!("kvbench:{secret}"))),
            format!("basic {}", b64(&format!("u:{secret}"))),
            format!("basic {}", b64(&format!("ab:{secret}!"))),
            format!("token {}", b64url(&format!("{secret}~~"))),
            format!("raw {}", b64(secret)),
        ];
        for text in echoes {
            let out = redact(&text, &[secret]);
            assert!(out.contains("[redacted]"), "{text} -> {out}");
            for form in secret_forms(secret) {
                assert!(!out.contains(&form), "{text} -> {out} still has {form}");
            }
            assert!(!out.contains("w0rd"), "{text} -> {out}");
        }
        // Short secrets' base64 runs are not redacted (they would match ordinary words), their
        // verbatim and percent-encoded forms are.
        assert_eq!(redact("the pw was ab", &["ab"]), "the pw was [redacted]");
    }

    #[test]
    fn long_quotes_are_cut_on_char_boundaries() {
        let long = "é".repeat(300);
        let q = quote(&long);
        assert!(q.len() <= MAX_QUOTE_BYTES + "…".len());
        assert!(q.ends_with('…'));
    }
}
