//! Secrets in foreign text: every form a server might echo one in ([`secret_forms`]), and
//! their redaction ([`redact`]) before any of it reaches an answer, a log line or a report.

use crate::stores::http::PATH_SEGMENT;

/// Replaces every occurrence of a secret in foreign text, in each form a server might echo it
/// ([`secret_forms`]), before [`crate::error::quote`] shortens it (so no half survives).
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

/// `secret` as a server might echo it: verbatim, percent-encoded (both escape sets, both hex
/// cases), and base64 (both alphabets) at its three alignments, the characters that depend on
/// neighbouring bytes left out.
pub fn secret_forms(secret: &str) -> Vec<String> {
    use base64::Engine;
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let mut forms = vec![secret.to_string()];
    for set in [NON_ALPHANUMERIC, PATH_SEGMENT] {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_before_the_quote_cuts_them() {
        let secret = "tok-0123456789abcdef";
        let text = format!("{}Bearer {secret} tail", "x".repeat(195));
        let q = crate::error::quote(&redact(&text, &[secret, ""]));
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
}
