//! Command-line flags and their environment variables; `--help` documents them. Tokens are
//! hidden from `--help` output and from every log line.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

use crate::connection::Limits;
use crate::fault::FaultConfig;
use crate::Settings;

/// Upstash-REST-compatible HTTP gateway in front of a real redis-server.
#[derive(Parser)]
#[command(name = "upstash-gateway", version, about)]
pub struct Args {
    /// Address to listen on (loopback by default).
    #[arg(long, env = "GATEWAY_LISTEN", default_value = "127.0.0.1:8079")]
    pub listen: SocketAddr,

    /// Redis to forward commands to.
    #[arg(
        long,
        env = "GATEWAY_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,

    /// A read region: single read commands (GET, MGET, ...) go to this Redis (a replica of
    /// --redis-url), everything else to --redis-url, as Upstash's read regions do.
    #[arg(long, env = "GATEWAY_READ_URL")]
    pub read_url: Option<String>,

    /// Token clients must present (`Authorization: Bearer` or `?_token=`); surrounding
    /// whitespace is ignored, a blank one is refused.
    #[arg(long, env = "UPSTASH_REDIS_REST_TOKEN", hide_env_values = true)]
    pub token: String,

    /// Largest request body accepted, in bytes; larger ones get `ERR max request size exceeded`.
    #[arg(long, env = "GATEWAY_MAX_REQUEST_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_request_bytes: usize,

    /// Largest answer one request may get back, in bytes (Upstash's 10 MB limit); a larger one
    /// is a 400 `ERR max response size exceeded`.
    #[arg(long, env = "GATEWAY_MAX_RESPONSE_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_response_bytes: usize,

    /// How long to wait for a Redis reply before answering 504 "unknown outcome", in milliseconds.
    #[arg(long, env = "GATEWAY_REDIS_TIMEOUT_MS", default_value_t = 10_000)]
    pub redis_timeout_ms: u64,

    /// How long a request that runs a script (EVAL, EVALSHA, FCALL, ...) may take before the
    /// gateway stops the script with SCRIPT KILL, in milliseconds.
    #[arg(long, env = "GATEWAY_SCRIPT_TIMEOUT_MS", default_value_t = 5_000)]
    pub script_timeout_ms: u64,

    /// Redis connections in use at once (one per request in flight).
    #[arg(long, env = "GATEWAY_REDIS_POOL_SIZE", default_value_t = 64)]
    pub redis_pool_size: usize,

    /// HTTP connections held at once; at the cap the longest-idle one is closed for a new client.
    #[arg(long, env = "GATEWAY_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,

    /// Close a connection idle (no request, no bytes) this long, in milliseconds.
    #[arg(long, env = "GATEWAY_IDLE_TIMEOUT_MS", default_value_t = 30_000)]
    pub idle_timeout_ms: u64,

    /// Close a connection whose request head is not complete this long after its first byte,
    /// in milliseconds.
    #[arg(long, env = "GATEWAY_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,

    /// Answer 408 when a request body has not fully arrived this long after its head, in
    /// milliseconds.
    #[arg(long, env = "GATEWAY_BODY_READ_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_read_timeout_ms: u64,

    /// Token for `GET`/`PUT /admin/faults`; without it the admin route answers 404.
    #[arg(long, env = "GATEWAY_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,

    /// Added latency per request in milliseconds: `50` (fixed) or `20-80` (uniform).
    #[arg(long, env = "GATEWAY_FAULT_DELAY_MS", value_parser = FaultConfig::parse_delay_ms)]
    pub fault_delay_ms: Option<(u64, u64)>,

    /// Fraction (0..=1) of requests answered with `--fault-status` instead of running.
    #[arg(long, env = "GATEWAY_FAULT_STATUS_FRACTION", default_value_t = 0.0)]
    pub fault_status_fraction: f64,

    /// HTTP status for `--fault-status-fraction`.
    #[arg(long, env = "GATEWAY_FAULT_STATUS", default_value_t = 503)]
    pub fault_status: u16,

    /// Fraction (0..=1) of requests whose connection is closed without an answer.
    #[arg(long, env = "GATEWAY_FAULT_DROP_FRACTION", default_value_t = 0.0)]
    pub fault_drop_fraction: f64,

    /// Seed for fault decisions (random when absent), to repeat a run exactly.
    #[arg(long, env = "GATEWAY_FAULT_SEED")]
    pub fault_seed: Option<u64>,
}

impl Args {
    /// The gateway settings these flags describe, checked.
    pub fn into_settings(self) -> Result<Settings, String> {
        let (delay_min_ms, delay_max_ms) = self.fault_delay_ms.unwrap_or((0, 0));
        let faults = FaultConfig {
            delay_min_ms,
            delay_max_ms,
            status_fraction: self.fault_status_fraction,
            status: self.fault_status,
            drop_fraction: self.fault_drop_fraction,
        };
        faults.validate()?;
        // Trimmed like presented tokens are, so a token saved with a trailing newline still
        // matches; blank is refused rather than meaning "no auth".
        let token = self.token.trim();
        if token.is_empty() {
            return Err(
                "--token (UPSTASH_REDIS_REST_TOKEN) is blank: set a non-empty token".into(),
            );
        }
        let admin_token = match self.admin_token {
            None => None,
            // Empty means "no admin route", as before.
            Some(t) if t.is_empty() => None,
            Some(t) if t.trim().is_empty() => {
                return Err("--admin-token (GATEWAY_ADMIN_TOKEN) is blank: set a non-empty token or leave it empty to disable the admin route".into())
            }
            Some(t) => Some(t.trim().to_owned()),
        };
        for (name, value) in [
            ("--max-response-bytes", self.max_response_bytes as u64),
            ("--redis-timeout-ms", self.redis_timeout_ms),
            ("--script-timeout-ms", self.script_timeout_ms),
            ("--redis-pool-size", self.redis_pool_size as u64),
            ("--max-connections", self.max_connections as u64),
            ("--idle-timeout-ms", self.idle_timeout_ms),
            ("--header-read-timeout-ms", self.header_read_timeout_ms),
            ("--body-read-timeout-ms", self.body_read_timeout_ms),
        ] {
            if value == 0 {
                return Err(format!("{name} must be greater than 0"));
            }
        }
        Ok(Settings {
            redis_url: self.redis_url,
            read_url: self.read_url,
            token: token.to_owned(),
            admin_token,
            max_request_bytes: self.max_request_bytes,
            max_response_bytes: self.max_response_bytes,
            redis_timeout_ms: self.redis_timeout_ms,
            script_timeout_ms: self.script_timeout_ms,
            redis_pool_size: self.redis_pool_size,
            body_read_timeout_ms: self.body_read_timeout_ms,
            connections: Limits {
                max_connections: self.max_connections,
                idle_timeout: Duration::from_millis(self.idle_timeout_ms),
                header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            },
            faults,
            fault_seed: self.fault_seed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_into_settings() {
        let args = Args::try_parse_from([
            "upstash-gateway",
            "--token",
            "t",
            "--fault-delay-ms",
            "5-9",
            "--fault-drop-fraction",
            "0.25",
        ])
        .unwrap();
        assert_eq!(args.listen.to_string(), "127.0.0.1:8079");
        let s = args.into_settings().unwrap();
        assert_eq!((s.faults.delay_min_ms, s.faults.delay_max_ms), (5, 9));
        assert_eq!(s.faults.drop_fraction, 0.25);
        assert_eq!(s.max_request_bytes, 10 * 1024 * 1024);
        assert_eq!(s.max_response_bytes, 10 * 1024 * 1024);
        assert_eq!(s.script_timeout_ms, 5_000);
        assert_eq!(s.connections, Limits::default());
        assert!(s.admin_token.is_none());
        // The defaults of the flags are the defaults of embedding.
        let embedded = Settings::new("redis://127.0.0.1:6379", "t");
        assert_eq!(
            (
                s.redis_timeout_ms,
                s.redis_pool_size,
                s.body_read_timeout_ms
            ),
            (
                embedded.redis_timeout_ms,
                embedded.redis_pool_size,
                embedded.body_read_timeout_ms
            )
        );
    }

    fn settings(args: &[&str]) -> Result<Settings, String> {
        let mut argv = vec!["upstash-gateway"];
        argv.extend_from_slice(args);
        Args::try_parse_from(argv).unwrap().into_settings()
    }

    #[test]
    fn blank_tokens_are_refused_and_tokens_trimmed() {
        for blank in ["", " ", "\t\n", "   \r\n"] {
            let err = settings(&["--token", blank]).unwrap_err();
            assert!(err.contains("--token") && err.contains("blank"), "{err}");
        }
        assert_eq!(settings(&["--token", " secret\n"]).unwrap().token, "secret");
        let err = settings(&["--token", "t", "--admin-token", "  "]).unwrap_err();
        assert!(err.contains("--admin-token"), "{err}");
        let s = settings(&["--token", "t", "--admin-token", "adm\n"]).unwrap();
        assert_eq!(s.admin_token.as_deref(), Some("adm"));
        assert!(settings(&["--token", "t", "--admin-token", ""])
            .unwrap()
            .admin_token
            .is_none());
    }

    #[test]
    fn limits_come_from_flags_and_zero_is_refused() {
        let s = settings(&[
            "--token",
            "t",
            "--max-connections",
            "7",
            "--idle-timeout-ms",
            "250",
            "--header-read-timeout-ms",
            "100",
            "--script-timeout-ms",
            "300",
            "--max-response-bytes",
            "1000",
        ])
        .unwrap();
        assert_eq!(s.connections.max_connections, 7);
        assert_eq!(s.connections.idle_timeout, Duration::from_millis(250));
        assert_eq!(
            s.connections.header_read_timeout,
            Duration::from_millis(100)
        );
        assert_eq!((s.script_timeout_ms, s.max_response_bytes), (300, 1000));
        for flag in [
            "--script-timeout-ms",
            "--max-connections",
            "--idle-timeout-ms",
        ] {
            let err = settings(&["--token", "t", flag, "0"]).unwrap_err();
            assert!(err.contains(flag), "{err}");
        }
    }

    #[test]
    fn fault_statuses_without_a_body_are_refused() {
        for status in ["100", "204", "205", "304"] {
            let err = settings(&["--token", "t", "--fault-status", status]).unwrap_err();
            assert!(err.contains("status"), "{status}: {err}");
        }
        assert!(settings(&["--token", "t", "--fault-status", "500"]).is_ok());
    }

    #[test]
    fn bad_fault_flags_are_refused() {
        let args = Args::try_parse_from([
            "upstash-gateway",
            "--token",
            "t",
            "--fault-status-fraction",
            "2",
        ])
        .unwrap();
        assert!(args.into_settings().is_err());
    }
}
