//! Upstash Redis over its REST API: one `POST` of a JSON command array per operation,
//! `Authorization: Bearer`, answer `{"result": ...}` or `{"error": "..."}`.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::error::{quote, redact, ErrorKind, StoreError};
use crate::http::{HttpRequest, HttpResponse, HttpTransport};
use crate::store::{ReadOptions, Store};

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
        }
    }

    async fn call(&self, command: Value) -> Result<Value, StoreError> {
        let response = self
            .transport
            .send(self.request(&command))
            .await
            .map_err(|e| self.redact(e))?;
        decode(&response, &[&self.token]).map_err(|e| self.redact(e))
    }

    /// Belt and braces: no message leaves this store with the token in it, whatever a server echoes.
    fn redact(&self, mut error: StoreError) -> StoreError {
        if !self.token.is_empty() && error.message.contains(&self.token) {
            error.message = error.message.replace(&self.token, "[redacted]");
        }
        error
    }
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

#[async_trait(?Send)]
impl<T: HttpTransport> Store for UpstashStore<T> {
    async fn get(&self, key: &str, _options: ReadOptions) -> Result<Option<Vec<u8>>, StoreError> {
        match self.call(json!(["GET", key])).await? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.into_bytes())),
            other => Err(StoreError::new(
                ErrorKind::Decode,
                format!(
                    "GET result is not a string or null: {}",
                    quote(&other.to_string())
                ),
            )),
        }
    }

    async fn put(&self, key: &str, value: &[u8], ttl_s: u32) -> Result<(), StoreError> {
        let value = std::str::from_utf8(value)
            .map_err(|_| StoreError::new(ErrorKind::Runtime, "value is not UTF-8"))?;
        match self.call(json!(["SET", key, value, "EX", ttl_s])).await? {
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

    fn resp(status: u16, body: &str) -> HttpResponse {
        HttpResponse {
            status,
            body: body.as_bytes().to_vec(),
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
