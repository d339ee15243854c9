//! Access control: `/test` and the probes' control spend the deployment's money, so they need
//! the secret `BENCH_TOKEN`, or without one `BENCH_OPEN = "true"` (the local stack).

/// Why a request was refused. The messages never contain the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing Authorization: Bearer header")]
    Missing,
    #[error("wrong bearer token")]
    Wrong,
}

/// The variable that holds the token `/test` requires.
pub const TOKEN_VAR: &str = "BENCH_TOKEN";

/// What the deployment configured: no token, a token (trimmed like a presented one), or a
/// token set but blank, which must not silently open `/test`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenConfig {
    /// No token set.
    Open,
    Required(String),
    Blank,
}

impl TokenConfig {
    /// From the raw secret (`None` = not set).
    pub fn from_raw(raw: Option<&str>) -> TokenConfig {
        match raw.map(str::trim) {
            None => TokenConfig::Open,
            Some("") => TokenConfig::Blank,
            Some(t) => TokenConfig::Required(t.to_string()),
        }
    }
}

/// Checks an `Authorization` header against the configured token (`None` = open access).
pub fn check(authorization: Option<&str>, token: Option<&str>) -> Result<(), AuthError> {
    let Some(token) = token.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(());
    };
    let presented = authorization
        .and_then(|h| {
            let (scheme, rest) = h.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .ok_or(AuthError::Missing)?;
    if constant_time_eq(presented.as_bytes(), token.as_bytes()) {
        Ok(())
    } else {
        Err(AuthError::Wrong)
    }
}

/// The rule of a route that only reads what is kept: open without a token, else the bearer must
/// match; a blank token fails closed (500). The error names `BENCH_TOKEN` or `Authorization`,
/// never the token.
pub fn admit(
    authorization: Option<&str>,
    raw_token: Option<&str>,
) -> Result<(), (u16, crate::error::ParamError)> {
    use crate::error::ParamError;
    let token = match TokenConfig::from_raw(raw_token) {
        TokenConfig::Open => None,
        TokenConfig::Required(t) => Some(t),
        TokenConfig::Blank => {
            return Err((
                500,
                ParamError::new(
                    TOKEN_VAR,
                    "is set but blank: /test refuses to run without its token; set a token or delete the secret",
                ),
            ))
        }
    };
    check(authorization, token.as_deref())
        .map_err(|e| (401, ParamError::new("Authorization", e.to_string())))
}

/// The var that opens the writing routes when no token is set: `"true"` (the local stack);
/// anything else keeps them closed.
pub const OPEN_VAR: &str = "BENCH_OPEN";

/// Whether `BENCH_OPEN` (as stored) opens the writing routes.
pub fn open_from_raw(raw: Option<&str>) -> bool {
    raw.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Why `/test` is closed without a token (after `BENCH_TOKEN`: the 403's parameter).
const TEST_CLOSED: &str = "is not set, so /test is closed: every /test writes to this deployment's stores (KV, Durable Objects, D1, R2, ...) on each miss, which bills the deployer and which anyone could grow; set one (npx wrangler secret put BENCH_TOKEN; npm run deploy always does) and send it as Authorization: Bearer, or set the var BENCH_OPEN = \"true\" to allow /test to anyone";

/// Why starting, stopping or keeping is closed without a token.
const KEEPING_CLOSED: &str = "is not set, so nothing may be started, stopped or kept here (each costs the deployment money): set one (npx wrangler secret put BENCH_TOKEN; npm run deploy always does) and send it as Authorization: Bearer, or set BENCH_OPEN = \"true\" to allow this to anyone";

/// The rule of `/test`: [`admit`]'s, and without a token only when `open`; the refusal is a 403
/// saying how to open it.
pub fn admit_test(
    authorization: Option<&str>,
    raw_token: Option<&str>,
    open: bool,
) -> Result<(), (u16, crate::error::ParamError)> {
    admit_closed(authorization, raw_token, open, TEST_CLOSED)
}

/// The rule of the probes' control (each spends while it runs): [`admit_test`]'s, own reason.
pub fn admit_keeping(
    authorization: Option<&str>,
    raw_token: Option<&str>,
    open: bool,
) -> Result<(), (u16, crate::error::ParamError)> {
    admit_closed(authorization, raw_token, open, KEEPING_CLOSED)
}

fn admit_closed(
    authorization: Option<&str>,
    raw_token: Option<&str>,
    open: bool,
    why_closed: &str,
) -> Result<(), (u16, crate::error::ParamError)> {
    admit(authorization, raw_token)?;
    if TokenConfig::from_raw(raw_token) == TokenConfig::Open && !open {
        return Err((403, crate::error::ParamError::new(TOKEN_VAR, why_closed)));
    }
    Ok(())
}

/// Compares without an early exit, so response timing does not reveal a matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission() {
        assert_eq!(admit(None, None), Ok(()));
        assert_eq!(admit(Some("Bearer t0k"), Some(" t0k\n")), Ok(()));
        let (status, e) = admit(None, Some("t0k")).unwrap_err();
        assert_eq!((status, e.parameter.as_str()), (401, "Authorization"));
        let (status, e) = admit(Some("Bearer t0k"), Some("  ")).unwrap_err();
        assert_eq!((status, e.parameter.as_str()), (500, TOKEN_VAR));
        assert!(!e.message.contains("t0k"));
    }

    #[test]
    fn test_is_closed_without_a_token_unless_open() {
        let (status, e) = admit_test(None, None, false).unwrap_err();
        assert_eq!((status, e.parameter.as_str()), (403, TOKEN_VAR));
        for why in [
            "/test",
            "writes",
            "stores",
            "wrangler secret put BENCH_TOKEN",
            "BENCH_OPEN",
        ] {
            assert!(e.message.contains(why), "{why}: {}", e.message);
        }
        assert_eq!(admit_test(None, None, true), Ok(()));
        assert_eq!(admit_test(Some("Bearer t0k"), Some("t0k"), false), Ok(()));
        // With a token, BENCH_OPEN opens nothing: the token is required.
        let (status, e) = admit_test(None, Some("t0k"), true).unwrap_err();
        assert_eq!((status, e.parameter.as_str()), (401, "Authorization"));
        assert_eq!(
            admit_test(Some("Bearer nope"), Some("t0k"), true)
                .unwrap_err()
                .0,
            401
        );
        let (status, e) = admit_test(None, Some(" "), true).unwrap_err();
        assert_eq!((status, e.parameter.as_str()), (500, TOKEN_VAR));
    }

    #[test]
    fn keeping_is_closed_without_a_token_unless_open() {
        let (status, e) = admit_keeping(None, None, false).unwrap_err();
        assert_eq!((status, e.parameter.as_str()), (403, TOKEN_VAR));
        assert!(e.message.contains("BENCH_OPEN"));
        assert_eq!(admit_keeping(None, None, true), Ok(()));
        assert_eq!(
            admit_keeping(Some("Bearer t0k"), Some("t0k"), false),
            Ok(())
        );
        assert_eq!(admit_keeping(None, Some("t0k"), true).unwrap_err().0, 401);
        assert_eq!(admit_keeping(None, Some(" "), true).unwrap_err().0, 500);
        for (raw, open) in [
            (None, false),
            (Some("true"), true),
            (Some(" TRUE\n"), true),
            (Some("false"), false),
            (Some("1"), false),
            (Some(""), false),
        ] {
            assert_eq!(open_from_raw(raw), open, "{raw:?}");
        }
    }

    #[test]
    fn table() {
        let t = Some("s3cret-token");
        assert_eq!(check(None, None), Ok(()));
        assert_eq!(check(Some("Bearer x"), None), Ok(()));
        assert_eq!(check(None, Some("")), Ok(()));
        assert_eq!(check(None, t), Err(AuthError::Missing));
        assert_eq!(check(Some("Basic abc"), t), Err(AuthError::Missing));
        assert_eq!(check(Some("Bearer"), t), Err(AuthError::Missing));
        assert_eq!(check(Some("Bearer s3cret"), t), Err(AuthError::Wrong));
        assert_eq!(
            check(Some("Bearer s3cret-token!"), t),
            Err(AuthError::Wrong)
        );
        assert_eq!(check(Some("Bearer s3cret-token"), t), Ok(()));
        assert_eq!(check(Some("bearer  s3cret-token "), t), Ok(()));
        assert!(!AuthError::Wrong.to_string().contains("s3cret"));
        // A configured token with stray whitespace is the token.
        assert_eq!(
            check(Some("Bearer s3cret-token"), Some("s3cret-token\n")),
            Ok(())
        );
    }

    #[test]
    fn token_config_table() {
        assert_eq!(TokenConfig::from_raw(None), TokenConfig::Open);
        for blank in ["", " ", "\n", " \t\r\n"] {
            assert_eq!(
                TokenConfig::from_raw(Some(blank)),
                TokenConfig::Blank,
                "{blank:?}"
            );
        }
        assert_eq!(
            TokenConfig::from_raw(Some(" tok\n")),
            TokenConfig::Required("tok".into())
        );
    }
}
