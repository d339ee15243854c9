//! `/test` parameters: defaults from the worker's `[vars]`, overrides from the query string, and
//! validation that names the offending parameter. Nothing is read or written unless all of it passes.

use serde::Serialize;

use crate::denokv::key as deno_key;
use crate::store::{Consistency, StoreId};

pub const KEYS_MAX: u32 = 1_000_000;
pub const BYTES_MAX: u32 = 1_048_576;
/// Cloudflare KV refuses an `expirationTtl` below 60 s.
pub const TTL_MIN_S: u32 = 60;
pub const TTL_MAX_S: u32 = 86_400;
/// Cloudflare KV's smallest `cacheTtl`.
pub const CACHE_TTL_MIN_S: u32 = 30;
pub const CACHE_TTL_MAX_S: u32 = 31_536_000;
/// Longest `key` any measurement accepts, in bytes (Deno KV's own limit; Upstash has none).
pub const KEY_MAX_BYTES: usize = 2048;
/// Cloudflare KV's key limit, in bytes: applies whenever `kv` is measured.
pub const KV_KEY_MAX_BYTES: usize = 512;
/// Deno KV's value limit, in bytes: `max_bytes` may not exceed it when `denokv` is measured.
pub const DENO_KV_VALUE_MAX_BYTES: u32 = deno_key::MAX_VALUE_BYTES as u32;
pub const TIMEOUT_MIN_MS: u32 = 100;
pub const TIMEOUT_MAX_MS: u32 = 60_000;

/// A parameter that failed validation; `parameter` is the query parameter (or `[vars]` name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
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

/// Splits and percent-decodes a raw query string (`a=1&b=x%20y`, `+` is a space) strictly: a name
/// or value that does not decode to valid UTF-8 is an error naming the parameter, never replaced
/// with U+FFFD (which would make `%FF%FE` and `%C0%AF` the same key).
pub fn parse_query(raw: &str) -> Result<Vec<(String, String)>, ParamError> {
    fn decode(text: &str) -> Result<String, ()> {
        let spaced = text.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| ())
    }
    raw.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode(name).map_err(|_| {
                ParamError::new(
                    &String::from_utf8_lossy(
                        &percent_encoding::percent_decode_str(name).collect::<Vec<u8>>(),
                    ),
                    "the parameter name is not valid UTF-8 once percent-decoded",
                )
            })?;
            let value = decode(value)
                .map_err(|_| ParamError::new(&name, "not valid UTF-8 once percent-decoded"))?;
            Ok((name, value))
        })
        .collect()
}

/// In which order the stores of one request are measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Shuffled per request, so no store is systematically first (warm connections, JIT, ...).
    Random,
    /// Exactly this order.
    Fixed(Vec<StoreId>),
}

/// Deployment defaults, from `[vars]` in wrangler.toml. Each field has the bounds of its parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    pub keys: u32,
    pub min_bytes: u32,
    pub max_bytes: u32,
    pub ttl_s: u32,
    pub stores: Vec<StoreId>,
    pub order: Order,
    pub cache_ttl_s: Option<u32>,
    pub timeout_ms: u32,
    pub consistency: Consistency,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            keys: 1000,
            min_bytes: 4096,
            max_bytes: 65_536,
            ttl_s: 60,
            stores: StoreId::ALL.to_vec(),
            order: Order::Random,
            cache_ttl_s: None,
            timeout_ms: 10_000,
            consistency: Consistency::Strong,
        }
    }
}

/// `[vars]` name → query parameter it provides the default for.
pub const VARS: [(&str, &str); 9] = [
    ("KEYS", "keys"),
    ("MIN_BYTES", "min_bytes"),
    ("MAX_BYTES", "max_bytes"),
    ("TTL", "ttl"),
    ("STORES", "stores"),
    ("ORDER", "order"),
    ("CACHE_TTL", "cache_ttl"),
    ("TIMEOUT_MS", "timeout_ms"),
    ("CONSISTENCY", "consistency"),
];

impl Defaults {
    /// Reads defaults from `[vars]`; a missing or empty var keeps the built-in default. An invalid
    /// var is an error naming the var, so a bad deployment fails loudly instead of measuring junk.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ParamError> {
        let base = Defaults::default();
        let pairs: Vec<(String, String)> = VARS
            .iter()
            .filter_map(|(var, param)| {
                lookup(var)
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| (param.to_string(), v))
            })
            .collect();
        let parsed = Params::parse(&pairs, &base).map_err(|e| {
            let var = VARS
                .iter()
                .find(|(_, p)| *p == e.parameter)
                .map(|(v, _)| *v)
                .unwrap_or("vars");
            ParamError::new(var, e.message)
        })?;
        Ok(Self {
            keys: parsed.keys,
            min_bytes: parsed.min_bytes,
            max_bytes: parsed.max_bytes,
            ttl_s: parsed.ttl_s,
            stores: parsed.stores,
            order: parsed.order,
            cache_ttl_s: parsed.cache_ttl_s,
            timeout_ms: parsed.timeout_ms,
            consistency: parsed.consistency,
        })
    }
}

/// The validated parameters of one `/test` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub keys: u32,
    pub min_bytes: u32,
    pub max_bytes: u32,
    pub ttl_s: u32,
    /// Stores to measure, without duplicates.
    pub stores: Vec<StoreId>,
    pub order: Order,
    pub cache_ttl_s: Option<u32>,
    pub timeout_ms: u32,
    /// Deno KV read consistency.
    pub consistency: Consistency,
    /// A fixed key instead of a random one.
    pub key: Option<String>,
}

/// Every query parameter `/test` accepts.
pub const PARAMETERS: [&str; 10] = [
    "keys",
    "min_bytes",
    "max_bytes",
    "ttl",
    "stores",
    "order",
    "cache_ttl",
    "timeout_ms",
    "consistency",
    "key",
];

impl Params {
    /// Validates query pairs (already percent-decoded) over `defaults`.
    pub fn parse(pairs: &[(String, String)], defaults: &Defaults) -> Result<Params, ParamError> {
        let mut seen: Vec<&str> = Vec::new();
        for (name, _) in pairs {
            if !PARAMETERS.contains(&name.as_str()) {
                return Err(ParamError::new(
                    name,
                    format!(
                        "unknown parameter; expected one of {}",
                        PARAMETERS.join(", ")
                    ),
                ));
            }
            if seen.contains(&name.as_str()) {
                return Err(ParamError::new(name, "given more than once"));
            }
            seen.push(name);
        }
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };

        let keys = match get("keys") {
            Some(v) => bounded("keys", v, 1, KEYS_MAX)?,
            None => defaults.keys,
        };
        let min_bytes = match get("min_bytes") {
            Some(v) => bounded("min_bytes", v, 1, BYTES_MAX)?,
            None => defaults.min_bytes,
        };
        let max_bytes = match get("max_bytes") {
            Some(v) => bounded("max_bytes", v, 1, BYTES_MAX)?,
            None => defaults.max_bytes,
        };
        if min_bytes > max_bytes {
            // Blame the parameter the caller gave; if both or neither, blame min_bytes.
            let blamed = if get("max_bytes").is_some() && get("min_bytes").is_none() {
                "max_bytes"
            } else {
                "min_bytes"
            };
            return Err(ParamError::new(
                blamed,
                format!("min_bytes ({min_bytes}) must not exceed max_bytes ({max_bytes})"),
            ));
        }
        let ttl_s = match get("ttl") {
            Some(v) => bounded("ttl", v, TTL_MIN_S, TTL_MAX_S)?,
            None => defaults.ttl_s,
        };
        let cache_ttl_s = match get("cache_ttl") {
            Some(v) => Some(bounded("cache_ttl", v, CACHE_TTL_MIN_S, CACHE_TTL_MAX_S)?),
            None => defaults.cache_ttl_s,
        };
        let timeout_ms = match get("timeout_ms") {
            Some(v) => bounded("timeout_ms", v, TIMEOUT_MIN_MS, TIMEOUT_MAX_MS)?,
            None => defaults.timeout_ms,
        };
        let consistency = match get("consistency") {
            Some(v) => Consistency::parse(v).ok_or_else(|| {
                ParamError::new(
                    "consistency",
                    format!("expected strong or eventual, got {v:?}"),
                )
            })?,
            None => defaults.consistency,
        };
        let explicit_stores = match get("stores") {
            Some(v) => Some(store_list("stores", v)?),
            None => None,
        };
        let order = match get("order") {
            None => None,
            Some("random") => Some(Order::Random),
            Some(v) => Some(Order::Fixed(store_list("order", v)?)),
        };
        // A fixed order names the stores too; `stores` and `order` must then agree.
        let (stores, order) = match (explicit_stores, order) {
            (Some(stores), Some(Order::Fixed(list))) => {
                if !same_set(&stores, &list) {
                    return Err(ParamError::new(
                        "order",
                        "must list exactly the stores in `stores`",
                    ));
                }
                (stores, Order::Fixed(list))
            }
            (None, Some(Order::Fixed(list))) => (list.clone(), Order::Fixed(list)),
            (Some(stores), Some(Order::Random)) => (stores, Order::Random),
            (None, Some(Order::Random)) => (defaults.stores.clone(), Order::Random),
            (Some(stores), None) => {
                let order = match &defaults.order {
                    Order::Fixed(list) => Order::Fixed(
                        list.iter()
                            .copied()
                            .filter(|s| stores.contains(s))
                            .collect(),
                    ),
                    Order::Random => Order::Random,
                };
                (stores, order)
            }
            (None, None) => (defaults.stores.clone(), defaults.order.clone()),
        };
        let order = match order {
            Order::Fixed(list) if !same_set(&stores, &list) => {
                return Err(ParamError::new(
                    "order",
                    "must list exactly the measured stores",
                ))
            }
            other => other,
        };
        let key = match get("key") {
            Some(k) => Some(valid_key(k, &stores)?),
            None => None,
        };
        if stores.contains(&StoreId::DenoKv) && max_bytes > DENO_KV_VALUE_MAX_BYTES {
            return Err(ParamError::new(
                "max_bytes",
                format!(
                    "Deno KV stores values of at most {DENO_KV_VALUE_MAX_BYTES} bytes, got \
                     max_bytes {max_bytes}; lower it or leave denokv out of `stores`"
                ),
            ));
        }
        Ok(Params {
            keys,
            min_bytes,
            max_bytes,
            ttl_s,
            stores,
            order,
            cache_ttl_s,
            timeout_ms,
            consistency,
            key,
        })
    }
}

fn bounded(name: &str, value: &str, min: u32, max: u32) -> Result<u32, ParamError> {
    let n: u64 = value.parse().map_err(|_| {
        ParamError::new(
            name,
            format!("expected an integer from {min} to {max}, got {value:?}"),
        )
    })?;
    if n < u64::from(min) || n > u64::from(max) {
        return Err(ParamError::new(
            name,
            format!("must be from {min} to {max}, got {n}"),
        ));
    }
    Ok(n as u32)
}

fn store_list(name: &str, value: &str) -> Result<Vec<StoreId>, ParamError> {
    let known = StoreId::ALL.map(StoreId::as_str).join(", ");
    let mut list = Vec::new();
    for part in value.split(',') {
        let part = part.trim();
        let id = StoreId::parse(part).ok_or_else(|| {
            ParamError::new(
                name,
                format!("unknown store {part:?}; expected a comma list of {known}"),
            )
        })?;
        if list.contains(&id) {
            return Err(ParamError::new(
                name,
                format!("store {part:?} listed twice"),
            ));
        }
        list.push(id);
    }
    Ok(list)
}

fn same_set(a: &[StoreId], b: &[StoreId]) -> bool {
    a.len() == b.len() && a.iter().all(|s| b.contains(s))
}

/// A fixed key must fit every measured store: 512 bytes with Cloudflare KV, 2,048 bytes of
/// tuple encoding (the key plus 2, plus 1 per NUL byte) with Deno KV, 2,048 bytes otherwise.
fn valid_key(key: &str, stores: &[StoreId]) -> Result<String, ParamError> {
    if key.is_empty() || key.len() > KEY_MAX_BYTES {
        return Err(ParamError::new(
            "key",
            format!("must be 1 to {KEY_MAX_BYTES} bytes, got {}", key.len()),
        ));
    }
    if stores.contains(&StoreId::Kv) && key.len() > KV_KEY_MAX_BYTES {
        return Err(ParamError::new(
            "key",
            format!(
                "Cloudflare KV keys are at most {KV_KEY_MAX_BYTES} bytes, got {}",
                key.len()
            ),
        ));
    }
    let encoded = deno_key::encoded_len(key);
    if stores.contains(&StoreId::DenoKv) && encoded > deno_key::MAX_KEY_BYTES {
        return Err(ParamError::new(
            "key",
            format!(
                "Deno KV keys are at most {} bytes encoded; the key [{:?}…] encodes to {encoded}",
                deno_key::MAX_KEY_BYTES,
                key.chars().take(8).collect::<String>()
            ),
        ));
    }
    if key == "." || key == ".." {
        return Err(ParamError::new("key", "must not be \".\" or \"..\""));
    }
    Ok(key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding_is_strict() {
        let ok = parse_query("key=a%20b&stores=kv,upstash&x=1+2&flag&&").unwrap();
        assert_eq!(
            ok,
            [
                ("key".to_string(), "a b".to_string()),
                ("stores".into(), "kv,upstash".into()),
                ("x".into(), "1 2".into()),
                ("flag".into(), String::new()),
            ]
        );
        assert_eq!(parse_query("key=%E2%82%AC").unwrap()[0].1, "€");
        for bad in ["key=%FF%FE", "key=%C0%AF", "ttl=60&key=%ED%A0%80"] {
            let e = parse_query(bad).unwrap_err();
            assert_eq!(e.parameter, "key", "{bad}");
        }
        assert!(parse_query("%FF=1").is_err());
        assert_eq!(parse_query("").unwrap(), []);
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<Params, ParamError> {
        Params::parse(&q(pairs), &Defaults::default())
    }

    #[test]
    fn defaults_apply() {
        let p = parse(&[]).unwrap();
        assert_eq!(
            (p.keys, p.min_bytes, p.max_bytes, p.ttl_s),
            (1000, 4096, 65536, 60)
        );
        assert_eq!(
            p.stores,
            vec![StoreId::Kv, StoreId::Upstash, StoreId::DenoKv]
        );
        assert_eq!(p.order, Order::Random);
        assert_eq!(p.consistency, Consistency::Strong);
        assert_eq!(p.timeout_ms, 10_000);
        assert_eq!(p.key, None);
    }

    #[test]
    fn valid_overrides() {
        let p = parse(&[
            ("keys", "1"),
            ("min_bytes", "1"),
            ("max_bytes", "1048576"),
            ("stores", "upstash,kv"),
            ("ttl", "86400"),
            ("cache_ttl", "30"),
            ("key", "abc"),
            ("order", "upstash,kv"),
        ])
        .unwrap();
        assert_eq!(
            (p.keys, p.min_bytes, p.max_bytes, p.ttl_s),
            (1, 1, 1_048_576, 86_400)
        );
        assert_eq!(p.cache_ttl_s, Some(30));
        assert_eq!(p.order, Order::Fixed(vec![StoreId::Upstash, StoreId::Kv]));
        assert_eq!(p.key.as_deref(), Some("abc"));
        let p = parse(&[("order", "kv")]).unwrap();
        assert_eq!(p.stores, vec![StoreId::Kv]);
        let p = parse(&[("stores", "upstash")]).unwrap();
        assert_eq!((p.stores, p.order), (vec![StoreId::Upstash], Order::Random));
        let p = parse(&[("consistency", "eventual"), ("order", "denokv")]).unwrap();
        assert_eq!(p.consistency, Consistency::Eventual);
        assert_eq!(p.stores, vec![StoreId::DenoKv]);
    }

    #[test]
    fn deno_kv_limits_apply_only_when_denokv_is_measured() {
        let at = |n: usize| "k".repeat(n);
        let ok = |pairs: &[(&str, &str)]| parse(pairs).map(|_| ()).map_err(|e| e.parameter);
        let blamed = |pairs: &[(&str, &str)]| parse(pairs).unwrap_err().parameter;
        // Values: 65,536 bytes is Deno KV's limit.
        assert_eq!(ok(&[("max_bytes", "65536")]), Ok(()));
        assert_eq!(blamed(&[("max_bytes", "65537")]), "max_bytes");
        assert_eq!(
            blamed(&[("max_bytes", "65537"), ("stores", "denokv")]),
            "max_bytes"
        );
        assert_eq!(
            ok(&[("max_bytes", "65537"), ("stores", "kv,upstash")]),
            Ok(())
        );
        // Keys: 512 bytes with KV; 2,048 encoded bytes (key + 2) with Deno KV alone.
        assert_eq!(ok(&[("key", &at(512))]), Ok(()));
        assert_eq!(blamed(&[("key", &at(513))]), "key");
        assert_eq!(ok(&[("key", &at(2046)), ("stores", "denokv")]), Ok(()));
        assert_eq!(blamed(&[("key", &at(2047)), ("stores", "denokv")]), "key");
        let nul = format!("{}\0", at(2045));
        assert_eq!(blamed(&[("key", &nul), ("stores", "denokv")]), "key");
        assert_eq!(ok(&[("key", &at(2048)), ("stores", "upstash")]), Ok(()));
        assert_eq!(blamed(&[("key", &at(2049)), ("stores", "upstash")]), "key");
        let e = parse(&[("key", &at(2047)), ("stores", "denokv")]).unwrap_err();
        assert!(e.message.contains("2048"), "{}", e.message);
        // A var default above the limit is blamed on the var.
        let e = Defaults::from_vars(|v| (v == "MAX_BYTES").then(|| "100000".into())).unwrap_err();
        assert_eq!(e.parameter, "MAX_BYTES");
        let d = Defaults::from_vars(|v| match v {
            "MAX_BYTES" => Some("100000".into()),
            "STORES" => Some("kv,upstash".into()),
            "CONSISTENCY" => Some("eventual".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(
            (d.max_bytes, d.consistency),
            (100_000, Consistency::Eventual)
        );
    }

    #[test]
    fn invalid_values_name_their_parameter() {
        let long = "k".repeat(513);
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("keys", "0")], "keys"),
            (&[("keys", "1000001")], "keys"),
            (&[("keys", "ten")], "keys"),
            (&[("keys", "-1")], "keys"),
            (&[("min_bytes", "0")], "min_bytes"),
            (&[("max_bytes", "1048577")], "max_bytes"),
            (&[("min_bytes", "5000"), ("max_bytes", "4000")], "min_bytes"),
            (&[("max_bytes", "100")], "max_bytes"),
            (&[("ttl", "59")], "ttl"),
            (&[("ttl", "86401")], "ttl"),
            (&[("ttl", "1.5")], "ttl"),
            (&[("cache_ttl", "29")], "cache_ttl"),
            (&[("timeout_ms", "10")], "timeout_ms"),
            (&[("stores", "kv,redis")], "stores"),
            (&[("stores", "kv,kv")], "stores"),
            (&[("stores", "")], "stores"),
            (&[("order", "kv,upstash,kv")], "order"),
            (&[("order", "sideways")], "order"),
            (&[("stores", "kv"), ("order", "upstash,kv")], "order"),
            (&[("key", "")], "key"),
            (&[("key", ".")], "key"),
            (&[("key", "..")], "key"),
            (&[("key", long.as_str())], "key"),
            (&[("bogus", "1")], "bogus"),
            (&[("ttl", "60"), ("ttl", "61")], "ttl"),
            (&[("consistency", "linearizable")], "consistency"),
            (&[("consistency", "")], "consistency"),
        ];
        for (pairs, parameter) in cases {
            let err = parse(pairs).expect_err(&format!("{pairs:?} should fail"));
            assert_eq!(&err.parameter, parameter, "{pairs:?}: {err}");
            assert!(!err.message.is_empty());
        }
    }

    #[test]
    fn vars_give_defaults_and_name_bad_vars() {
        let d = Defaults::from_vars(|v| match v {
            "KEYS" => Some("10".into()),
            "ORDER" => Some("kv,upstash".into()),
            "CACHE_TTL" => Some("".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(d.keys, 10);
        assert_eq!(d.order, Order::Fixed(vec![StoreId::Kv, StoreId::Upstash]));
        assert_eq!(d.cache_ttl_s, None);
        let err = Defaults::from_vars(|v| (v == "TTL").then(|| "5".into())).unwrap_err();
        assert_eq!(err.parameter, "TTL");
    }
}
