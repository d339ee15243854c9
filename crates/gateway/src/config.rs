//! Command-line flags and their environment variables; `--help` documents them. Tokens are
//! hidden from `--help` output and from every log line.

use std::net::SocketAddr;

use clap::Parser;

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

    /// Token clients must present (`Authorization: Bearer` or `?_token=`).
    #[arg(long, env = "UPSTASH_REDIS_REST_TOKEN", hide_env_values = true)]
    pub token: String,

    /// Largest request body accepted, in bytes; larger ones get `ERR max request size exceeded`.
    #[arg(long, env = "GATEWAY_MAX_REQUEST_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_request_bytes: usize,

    /// How long to wait for a Redis reply before answering 502, in milliseconds.
    #[arg(long, env = "GATEWAY_REDIS_TIMEOUT_MS", default_value_t = 10_000)]
    pub redis_timeout_ms: u64,

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
        if self.token.is_empty() {
            return Err("the token must not be empty".into());
        }
        Ok(Settings {
            redis_url: self.redis_url,
            token: self.token,
            admin_token: self.admin_token.filter(|t| !t.is_empty()),
            max_request_bytes: self.max_request_bytes,
            redis_timeout_ms: self.redis_timeout_ms,
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
        assert!(s.admin_token.is_none());
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
