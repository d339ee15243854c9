//! A Redis command as the REST surface receives it (a JSON array or path segments), checked
//! against the [`allowlist`](crate::allowlist). The body is read as raw JSON so a number reaches
//! Redis as the exact text the client wrote.

use percent_encoding::percent_decode_str;
use serde_json::value::RawValue;

use crate::allowlist;
use crate::error::ApiError;
use crate::name::display_name;

/// One Redis command: the name first, then its arguments, all as raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub args: Vec<Vec<u8>>,
}

impl Command {
    /// The command name in upper case, for checks (never the arguments: they may be secrets).
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.args[0]).to_ascii_uppercase()
    }

    /// The name for logs and error messages: upper case, printable ASCII only (anything else
    /// escaped, so a name cannot forge log lines or terminal escapes), at most 40 characters.
    pub fn display_name(&self) -> String {
        display_name(&self.args[0])
    }

    /// Whether this runs a Lua script or a function (and so gets the script time limit).
    pub fn is_script(&self) -> bool {
        matches!(
            self.name().as_str(),
            "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "FCALL" | "FCALL_RO"
        )
    }

    /// Whether a read region answers this from its replica (`--read-url`): reads of a value, as
    /// Upstash's read regions; everything else goes to the primary.
    pub fn is_read(&self) -> bool {
        matches!(
            self.name().as_str(),
            "GET" | "MGET" | "STRLEN" | "EXISTS" | "TTL" | "PTTL" | "GETRANGE" | "HGET" | "HGETALL"
        )
    }

    /// A command from a JSON body that must be a non-empty array of strings or numbers.
    pub fn from_json(body: &[u8]) -> Result<Self, ApiError> {
        let raw = parse_raw(body)?;
        let command = Self::from_raw(raw)?;
        command.check_allowed()?;
        Ok(command)
    }

    /// A list of commands (for `/pipeline` and `/multi-exec`): a non-empty JSON array of commands.
    pub fn list_from_json(body: &[u8]) -> Result<Vec<Self>, ApiError> {
        let raw = parse_raw(body)?;
        let items = array_items(raw).ok_or_else(|| {
            ApiError::bad_request(
                "ERR body must be a JSON array of commands (arrays of strings or numbers)",
            )
        })?;
        if items.is_empty() {
            return Err(ApiError::bad_request("ERR empty pipeline"));
        }
        items
            .into_iter()
            .map(|item| {
                let command = Self::from_raw(item)?;
                command.check_allowed()?;
                Ok(command)
            })
            .collect()
    }

    fn from_raw(raw: &RawValue) -> Result<Self, ApiError> {
        let items = array_items(raw).ok_or_else(|| {
            ApiError::bad_request("ERR command must be a JSON array of strings or numbers")
        })?;
        if items.is_empty() {
            return Err(ApiError::bad_request("ERR empty command"));
        }
        let mut args = Vec::with_capacity(items.len());
        for item in items {
            let text = item.get();
            match text.as_bytes()[0] {
                b'"' => args.push(
                    serde_json::from_str::<String>(text)
                        .map_err(|e| ApiError::bad_request(format!("ERR bad JSON string: {e}")))?
                        .into_bytes(),
                ),
                // The exact digits the client sent: serde_json already checked it is a number.
                b'-' | b'0'..=b'9' => args.push(text.as_bytes().to_vec()),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "ERR command arguments must be strings or numbers, got {}",
                        json_kind(other)
                    )))
                }
            }
        }
        Ok(Self { args })
    }

    /// A command from a URL path `/set/k/v/EX/60`: percent-decoded segments, empty ones skipped,
    /// then `body` (when not empty), then the query's names and values (`/set/k?EX=60` with the
    /// value as body is `SET k <body> EX 60`, as Upstash documents); `_token` is not an argument.
    pub fn from_path(path: &str, query: Option<&str>, body: &[u8]) -> Result<Self, ApiError> {
        let mut args: Vec<Vec<u8>> = path
            .split('/')
            .filter(|segment| !segment.is_empty())
            .map(|segment| percent_decode_str(segment).collect())
            .collect();
        if args.is_empty() {
            return Err(ApiError::bad_request("ERR empty command"));
        }
        if !body.is_empty() {
            args.push(body.to_vec());
        }
        let pairs = query.unwrap_or("").split('&').filter(|p| !p.is_empty());
        for pair in pairs {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name: Vec<u8> = percent_decode_str(name).collect();
            if name == b"_token" {
                continue;
            }
            args.push(name);
            if !value.is_empty() {
                args.push(percent_decode_str(value).collect());
            }
        }
        let command = Self { args };
        command.check_allowed()?;
        Ok(command)
    }

    fn check_allowed(&self) -> Result<(), ApiError> {
        allowlist::check(&self.args).map_err(|refusal| {
            tracing::debug!(command = %self.display_name(), "refused command");
            ApiError::bad_request(refusal.message(&self.args))
        })
    }
}

fn parse_raw(body: &[u8]) -> Result<&RawValue, ApiError> {
    serde_json::from_slice::<&RawValue>(body)
        .map_err(|err| ApiError::bad_request(format!("ERR request body is not valid JSON: {err}")))
}

/// The elements of a JSON array, each as its raw text; `None` when `raw` is not an array.
fn array_items(raw: &RawValue) -> Option<Vec<&RawValue>> {
    if !raw.get().starts_with('[') {
        return None;
    }
    // A RawValue is valid JSON, so an array always parses into its elements.
    serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok()
}

/// What a JSON value is, from its first character.
fn json_kind(first: u8) -> &'static str {
    match first {
        b'n' => "null",
        b't' | b'f' => "a boolean",
        b'[' => "an array",
        b'{' => "an object",
        _ => "something else",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(c: &Command) -> Vec<String> {
        c.args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    fn parse(body: &str) -> Result<Command, ApiError> {
        Command::from_json(body.as_bytes())
    }

    #[test]
    fn json_commands_accept_strings_and_numbers_as_written() {
        let c = parse(r#"["SET", "k", "v", "EX", 60, 1.5]"#).unwrap();
        assert_eq!(strings(&c), ["SET", "k", "v", "EX", "60", "1.5"]);
        assert_eq!(c.name(), "SET");
        // Large and exotic numbers pass as their exact text, not as a rounded float.
        let c = parse(
            r#" ["SET","k",123456789012345678901234567890, -0.000000000000000000001, 1E400] "#,
        )
        .unwrap();
        assert_eq!(
            strings(&c)[2..],
            [
                "123456789012345678901234567890",
                "-0.000000000000000000001",
                "1E400"
            ]
        );
        let c = parse(r#"["SET","k","a\"b\u00e9\n"]"#).unwrap();
        assert_eq!(c.args[2], "a\"bé\n".as_bytes());
    }

    #[test]
    fn json_commands_reject_bad_shapes() {
        for (body, needle) in [
            (r#"{"cmd": "GET"}"#, "JSON array"),
            (r#""GET""#, "JSON array"),
            ("[]", "empty command"),
            (r#"["GET", null]"#, "null"),
            (r#"["GET", true]"#, "boolean"),
            (r#"["GET", ["k"]]"#, "array"),
            (r#"["GET", {"k": 1}]"#, "object"),
            ("[\"GET\", 01]", "not valid JSON"),
            ("[\"GET\"", "not valid JSON"),
        ] {
            let err = parse(body).unwrap_err();
            assert_eq!(err.status, 400, "{body}");
            assert!(err.message.contains(needle), "{body}: {}", err.message);
        }
    }

    #[test]
    fn command_lists_must_be_non_empty_arrays_of_commands() {
        let list = Command::list_from_json(br#"[["GET", "a"], ["GET", "b"]]"#).unwrap();
        assert_eq!(list.len(), 2);
        assert!(Command::list_from_json(b"[]").is_err());
        assert!(Command::list_from_json(br#"["GET", "a"]"#).is_err());
        assert!(Command::list_from_json(br#"{"a": 1}"#).is_err());
        let err =
            Command::list_from_json(br#"[["GET", "a"], ["CONFIG", "SET", "x", "y"]]"#).unwrap_err();
        assert!(err.message.contains("CONFIG"), "{}", err.message);
    }

    #[test]
    fn query_parameters_follow_the_body() {
        let c = Command::from_path("/set/k", Some("EX=60&_token=secret&NX"), b"v a").unwrap();
        let want: Vec<&[u8]> = vec![b"set", b"k", b"v a", b"EX", b"60", b"NX"];
        assert_eq!(c.args, want);
        let c = Command::from_path("/set/k", Some("EX=%36%30"), b"").unwrap();
        let want: Vec<&[u8]> = vec![b"set", b"k", b"EX", b"60"];
        assert_eq!(c.args, want);
    }

    #[test]
    fn path_segments_are_percent_decoded_and_body_appended() {
        let c = Command::from_path("/set/a%2Fb/h%C3%A9llo%20x/EX/60", None, b"").unwrap();
        assert_eq!(strings(&c), ["set", "a/b", "héllo x", "EX", "60"]);
        let c = Command::from_path("/set/k/", None, b"body").unwrap();
        assert_eq!(strings(&c), ["set", "k", "body"]);
        let c = Command::from_path("/set/%FF", None, b"").unwrap();
        assert_eq!(c.args[1], vec![0xFF]);
        assert!(Command::from_path("/", None, b"").is_err());
        assert!(Command::from_path("/config/set/x/y", None, b"").is_err());
    }

    #[test]
    fn names_in_messages_are_printable_and_bounded() {
        let evil = Command::from_path("/x%0A%1B%5B31mFAKE%20LOG%20LINE", None, b"").unwrap_err();
        assert!(
            !evil.message.chars().any(|c| c.is_control()),
            "{:?}",
            evil.message
        );
        assert!(
            evil.message.contains("X\\x0a\\x1b[31MFAKE\\x20LOG"),
            "{}",
            evil.message
        );
        let long = format!("/{}", "a".repeat(10_000));
        let err = Command::from_path(&long, None, b"").unwrap_err();
        assert!(err.message.len() < 200, "{}", err.message);
    }

    #[test]
    fn scripts_are_recognised() {
        for (body, script) in [
            (r#"["eval", "return 1", 0]"#, true),
            (r#"["EVALSHA_RO", "abc", 0]"#, true),
            (r#"["fcall", "f", 0]"#, true),
            (r#"["GET", "k"]"#, false),
        ] {
            assert_eq!(parse(body).unwrap().is_script(), script, "{body}");
        }
    }
}
