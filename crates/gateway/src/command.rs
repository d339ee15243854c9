//! A Redis command as the REST surface receives it: parsed from a JSON array or from URL path
//! segments, and checked against commands that would corrupt the shared Redis connection.

use percent_encoding::percent_decode_str;
use serde_json::Value as Json;

use crate::error::ApiError;

/// One Redis command: the name first, then its arguments, all as raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub args: Vec<Vec<u8>>,
}

impl Command {
    /// The command name in upper case, for checks and logs (never the arguments: they may be secrets).
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.args[0]).to_ascii_uppercase()
    }

    /// A command from one JSON value that must be a non-empty array of strings or numbers.
    pub fn from_json(value: &Json) -> Result<Self, ApiError> {
        let items = value.as_array().ok_or_else(|| {
            ApiError::bad_request("ERR command must be a JSON array of strings or numbers")
        })?;
        if items.is_empty() {
            return Err(ApiError::bad_request("ERR empty command"));
        }
        let mut args = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Json::String(s) => args.push(s.clone().into_bytes()),
                // serde_json prints integers without a fraction and floats in shortest form,
                // which is what Redis parses.
                Json::Number(n) => args.push(n.to_string().into_bytes()),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "ERR command arguments must be strings or numbers, got {}",
                        json_kind(other)
                    )))
                }
            }
        }
        let command = Self { args };
        command.check_supported()?;
        Ok(command)
    }

    /// A list of commands (for `/pipeline` and `/multi-exec`): a non-empty JSON array of commands.
    pub fn list_from_json(value: &Json) -> Result<Vec<Self>, ApiError> {
        let items = value.as_array().ok_or_else(|| {
            ApiError::bad_request(
                "ERR body must be a JSON array of commands (arrays of strings or numbers)",
            )
        })?;
        if items.is_empty() {
            return Err(ApiError::bad_request("ERR empty pipeline"));
        }
        items.iter().map(Self::from_json).collect()
    }

    /// A command from a URL path `/set/k/v/EX/60`: percent-decoded segments, empty ones skipped;
    /// `body`, when not empty, is appended as the last argument.
    pub fn from_path(path: &str, body: &[u8]) -> Result<Self, ApiError> {
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
        let command = Self { args };
        command.check_supported()?;
        Ok(command)
    }

    /// Rejects commands that would change the state of the one connection all requests share,
    /// or block it for everyone.
    fn check_supported(&self) -> Result<(), ApiError> {
        let name = self.name();
        let reason = match name.as_str() {
            "MULTI" | "EXEC" | "DISCARD" | "WATCH" | "UNWATCH" => {
                "transactions across requests are not supported: use /multi-exec"
            }
            "SELECT" | "AUTH" | "HELLO" | "QUIT" | "RESET" => {
                "connection state cannot be changed through the gateway"
            }
            "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE" | "UNSUBSCRIBE" | "PUNSUBSCRIBE"
            | "SUNSUBSCRIBE" | "MONITOR" | "SYNC" | "PSYNC" => {
                "streaming commands are not supported by the gateway"
            }
            "BLPOP" | "BRPOP" | "BRPOPLPUSH" | "BLMOVE" | "BLMPOP" | "BZPOPMIN" | "BZPOPMAX"
            | "BZMPOP" | "WAIT" | "WAITAOF" => "blocking commands are not supported by the gateway",
            "XREAD" | "XREADGROUP"
                if self.args.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK")) =>
            {
                "blocking commands are not supported by the gateway"
            }
            "CLIENT"
                if self.args.get(1).is_some_and(|a| {
                    a.eq_ignore_ascii_case(b"REPLY") || a.eq_ignore_ascii_case(b"TRACKING")
                }) =>
            {
                "connection state cannot be changed through the gateway"
            }
            _ => return Ok(()),
        };
        Err(ApiError::bad_request(format!("ERR {name}: {reason}")))
    }
}

fn json_kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(c: &Command) -> Vec<String> {
        c.args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    #[test]
    fn json_commands_accept_strings_and_numbers() {
        let c = Command::from_json(&json!(["SET", "k", "v", "EX", 60, 1.5])).unwrap();
        assert_eq!(strings(&c), ["SET", "k", "v", "EX", "60", "1.5"]);
        assert_eq!(c.name(), "SET");
    }

    #[test]
    fn json_commands_reject_bad_shapes() {
        for (body, needle) in [
            (json!({"cmd": "GET"}), "JSON array"),
            (json!("GET"), "JSON array"),
            (json!([]), "empty command"),
            (json!(["GET", null]), "null"),
            (json!(["GET", true]), "boolean"),
            (json!(["GET", ["k"]]), "array"),
            (json!(["GET", {"k": 1}]), "object"),
        ] {
            let err = Command::from_json(&body).unwrap_err();
            assert_eq!(err.status, 400, "{body}");
            assert!(err.message.contains(needle), "{body}: {}", err.message);
        }
    }

    #[test]
    fn command_lists_must_be_non_empty_arrays_of_commands() {
        assert_eq!(
            Command::list_from_json(&json!([["GET", "a"], ["GET", "b"]]))
                .unwrap()
                .len(),
            2
        );
        assert!(Command::list_from_json(&json!([])).is_err());
        assert!(Command::list_from_json(&json!(["GET", "a"])).is_err());
        assert!(Command::list_from_json(&json!({"a": 1})).is_err());
    }

    #[test]
    fn path_segments_are_percent_decoded_and_body_appended() {
        let c = Command::from_path("/set/a%2Fb/h%C3%A9llo%20x/EX/60", b"").unwrap();
        assert_eq!(strings(&c), ["set", "a/b", "héllo x", "EX", "60"]);
        let c = Command::from_path("/set/k/", b"body").unwrap();
        assert_eq!(strings(&c), ["set", "k", "body"]);
        let c = Command::from_path("/set/%FF", b"").unwrap();
        assert_eq!(c.args[1], vec![0xFF]);
        assert!(Command::from_path("/", b"").is_err());
    }

    #[test]
    fn connection_altering_commands_are_refused() {
        for cmd in [
            json!(["multi"]),
            json!(["SELECT", 1]),
            json!(["subscribe", "ch"]),
            json!(["BLPOP", "l", 0]),
            json!(["XREAD", "BLOCK", 0, "STREAMS", "s", "$"]),
            json!(["CLIENT", "REPLY", "OFF"]),
        ] {
            let err = Command::from_json(&cmd).unwrap_err();
            assert!(err.message.starts_with("ERR "), "{}", err.message);
        }
        assert!(Command::from_json(&json!(["XREAD", "STREAMS", "s", "0"])).is_ok());
        assert!(Command::from_json(&json!(["CLIENT", "LIST"])).is_ok());
    }
}
