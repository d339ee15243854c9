//! `/test` parameters: defaults from the worker's `[vars]`, overrides from the query string, and
//! validation that names the offending parameter. Nothing is read or written unless all of it passes.

use crate::error::ParamError;
use crate::measurement::parameter::{
    self, Accepts, Parameter, KEY_MAX_BYTES, TTL_MAX_S, TTL_MIN_S,
};
use crate::spec::{StoreSpec, RESERVED_PREFIX};
use crate::stores::durable::{DoScope, LocationHint};
use crate::stores::sql::D1Session;
use crate::stores::store::{Consistency, Options, StoreId};

/// Splits and percent-decodes a raw query (`+` is a space) strictly: invalid UTF-8 is an error
/// naming the parameter, never U+FFFD (which would make `%FF%FE` and `%C0%AF` one key).
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
            if name.is_empty() {
                return Err(ParamError::new(
                    "query",
                    "a parameter without a name (`=value`)",
                ));
            }
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
    pub do_scope: DoScope,
    pub do_location: Option<LocationHint>,
    pub d1_session: Option<D1Session>,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            keys: 1000,
            min_bytes: 4096,
            max_bytes: 65_536,
            ttl_s: 60,
            stores: StoreId::DEFAULT.to_vec(),
            order: Order::Random,
            cache_ttl_s: None,
            timeout_ms: 10_000,
            consistency: Consistency::Strong,
            do_scope: DoScope::Key,
            do_location: None,
            d1_session: None,
        }
    }
}

/// `[vars]` name → query parameter it provides the default for ([`crate::measurement::parameter`]).
pub fn vars() -> impl Iterator<Item = (&'static str, &'static str)> {
    parameter::ALL
        .iter()
        .filter_map(|p| p.var.map(|var| (var, p.name)))
}

impl Defaults {
    /// Reads defaults from `[vars]`; a missing or empty var keeps the built-in default. An invalid
    /// var is an error naming the var, so a bad deployment fails loudly instead of measuring junk.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ParamError> {
        let base = Defaults::default();
        let pairs: Vec<(String, String)> = vars()
            .filter_map(|(var, param)| {
                lookup(var)
                    .filter(|v| !v.trim().is_empty())
                    .map(|v| (param.to_string(), v))
            })
            .collect();
        let parsed = Params::parse(&pairs, &base).map_err(|e| {
            let var = vars()
                .find(|(_, p)| *p == e.parameter)
                .map_or("vars", |(v, _)| v);
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
            do_scope: parsed.do_scope,
            do_location: parsed.do_location,
            d1_session: parsed.d1_session,
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
    /// Which Durable Object holds a key.
    pub do_scope: DoScope,
    /// Where new Durable Objects are placed.
    pub do_location: Option<LocationHint>,
    /// D1 Sessions API constraint.
    pub d1_session: Option<D1Session>,
    /// A fixed key instead of a random one.
    pub key: Option<String>,
}

impl Params {
    /// Validates query pairs (already percent-decoded) over `defaults`.
    pub fn parse(pairs: &[(String, String)], defaults: &Defaults) -> Result<Params, ParamError> {
        let mut seen: Vec<&str> = Vec::new();
        for (name, _) in pairs {
            if parameter::named(name).is_none() {
                let known: Vec<&str> = parameter::ALL.iter().map(|p| p.name).collect();
                return Err(ParamError::new(
                    name,
                    format!("unknown parameter; expected one of {}", known.join(", ")),
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

        // A given value through its parameter's rule, else the default.
        let int_or = |p: &Parameter, default: u32| get(p.name).map_or(Ok(default), |v| int(p, v));
        let keys = int_or(&parameter::KEYS, defaults.keys)?;
        let min_bytes = int_or(&parameter::MIN_BYTES, defaults.min_bytes)?;
        let max_bytes = int_or(&parameter::MAX_BYTES, defaults.max_bytes)?;
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
        let cache_ttl_s = match get("cache_ttl") {
            Some(v) => Some(int(&parameter::CACHE_TTL, v)?),
            None => defaults.cache_ttl_s,
        };
        let timeout_ms = int_or(&parameter::TIMEOUT_MS, defaults.timeout_ms)?;
        let named = |p: &Parameter| get(p.name);
        let consistency = named(&parameter::CONSISTENCY).map_or(Ok(defaults.consistency), |v| {
            one_of(&parameter::CONSISTENCY, v, Consistency::parse)
        })?;
        let do_scope = named(&parameter::DO_SCOPE).map_or(Ok(defaults.do_scope), |v| {
            one_of(&parameter::DO_SCOPE, v, DoScope::parse)
        })?;
        let do_location = named(&parameter::DO_LOCATION).map_or(Ok(defaults.do_location), |v| {
            none_or(&parameter::DO_LOCATION, v, LocationHint::parse)
        })?;
        let d1_session = named(&parameter::D1_SESSION).map_or(Ok(defaults.d1_session), |v| {
            none_or(&parameter::D1_SESSION, v, D1Session::parse)
        })?;
        let (stores, order) = stores_and_order(&get, defaults)?;
        let specs: Vec<&StoreSpec> = stores.iter().map(|s| s.spec()).collect();
        let ttl_s = ttl(get("ttl"), &specs, defaults)?;
        let key = get("key").map(|k| valid_key(k, &specs)).transpose()?;
        value_limits(&specs, max_bytes)?;
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
            do_scope,
            do_location,
            d1_session,
            key,
        })
    }

    /// The per-request options every store call gets.
    pub fn options(&self) -> Options {
        Options {
            cache_ttl_s: self.cache_ttl_s,
            consistency: self.consistency,
            do_scope: self.do_scope,
            do_location: self.do_location,
            d1_session: self.d1_session,
            colo: None,
        }
    }
}

/// The measured stores and their order: `stores` and `order` as given (a fixed order names the
/// stores too, and both must then agree), else the defaults'.
fn stores_and_order<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    defaults: &Defaults,
) -> Result<(Vec<StoreId>, Order), ParamError> {
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
    Ok((stores, order))
}

/// `ttl` as given, within what every measured store accepts, else the default (which must be too).
fn ttl(given: Option<&str>, specs: &[&StoreSpec], defaults: &Defaults) -> Result<u32, ParamError> {
    let ttl_s = match given {
        Some(v) => {
            let (min, by) = ttl_min(specs);
            bounded("ttl", v, min, TTL_MAX_S).map_err(|e| match by {
                Some(store) => ParamError::new(
                    "ttl",
                    format!("{} ({store} refuses less than {min} s)", e.message),
                ),
                None => e,
            })?
        }
        None => defaults.ttl_s,
    };
    if given.is_none() {
        // A default below a measured store's minimum is an error of the request's stores.
        let (min, by) = ttl_min(specs);
        if ttl_s < min {
            return Err(ParamError::new(
                "stores",
                format!(
                    "{} refuses a TTL below {min} s and the default ttl is {ttl_s}: give ttl",
                    by.unwrap_or("a store")
                ),
            ));
        }
    }
    Ok(ttl_s)
}

/// `max_bytes` within every measured store's value limit.
fn value_limits(specs: &[&StoreSpec], max_bytes: u32) -> Result<(), ParamError> {
    for spec in specs {
        if let Some(limit) = spec.value_max_bytes.filter(|l| u64::from(max_bytes) > *l) {
            return Err(ParamError::new(
                "max_bytes",
                format!(
                    "{} stores values of at most {limit} bytes, got max_bytes {max_bytes}; \
                     lower it or leave {} out of `stores`",
                    spec.name,
                    spec.id.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// The shortest TTL every measured store accepts, and the store that sets it.
fn ttl_min(specs: &[&StoreSpec]) -> (u32, Option<&'static str>) {
    specs
        .iter()
        .filter(|s| s.ttl_min_s > TTL_MIN_S)
        .max_by_key(|s| s.ttl_min_s)
        .map_or((TTL_MIN_S, None), |s| (s.ttl_min_s, Some(s.id.as_str())))
}

/// A whole number within what `p` accepts.
fn int(p: &Parameter, value: &str) -> Result<u32, ParamError> {
    match p.accepts {
        Accepts::Int { min, max, .. } => bounded(p.name, value, min, max),
        _ => Err(ParamError::new(p.name, p.expected(value))),
    }
}

/// One of the names `p` accepts, as `parse` reads it.
fn one_of<T>(p: &Parameter, value: &str, parse: fn(&str) -> Option<T>) -> Result<T, ParamError> {
    parse(value).ok_or_else(|| ParamError::new(p.name, p.expected(value)))
}

/// `none`, or one of the names `p` accepts.
fn none_or<T>(
    p: &Parameter,
    value: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<Option<T>, ParamError> {
    match value {
        "none" => Ok(None),
        v => one_of(p, v, parse).map(Some),
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

/// A fixed key must fit every measured store's own limit (namespace and encoding included) and
/// not start with the namespaces' prefix.
fn valid_key(key: &str, specs: &[&StoreSpec]) -> Result<String, ParamError> {
    if key.is_empty() || key.len() > KEY_MAX_BYTES {
        return Err(ParamError::new(
            "key",
            format!("must be 1 to {KEY_MAX_BYTES} bytes, got {}", key.len()),
        ));
    }
    if key.starts_with(RESERVED_PREFIX) {
        return Err(ParamError::new(
            "key",
            format!("must not start with {RESERVED_PREFIX:?}, the stores' namespace prefix"),
        ));
    }
    for spec in specs {
        let Some(max) = spec.key_max() else { continue };
        let len = spec.key_len(key);
        if len > max {
            return Err(ParamError::new(
                "key",
                format!(
                    "{} keys are at most {max} bytes{}; [{:?}…] makes {len}",
                    spec.name,
                    match (spec.key_namespace, spec.key_encoding) {
                        ("", crate::spec::KeyEncoding::Bytes) => String::new(),
                        ("", _) => " encoded".to_string(),
                        (ns, _) => format!(" with the namespace {ns:?}"),
                    },
                    key.chars().take(8).collect::<String>()
                ),
            ));
        }
    }
    if key == "." || key == ".." {
        return Err(ParamError::new("key", "must not be \".\" or \"..\""));
    }
    Ok(key.to_string())
}

/// Query pairs for a test, as [`parse_query`] gives them.
#[cfg(test)]
pub(crate) fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
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
        assert_eq!(parse_query("=1").unwrap_err().parameter, "query");
        assert_eq!(parse_query("ttl=60&=").unwrap_err().parameter, "query");
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
        assert_eq!(p.stores, StoreId::DEFAULT.to_vec());
        assert_eq!(p.order, Order::Random);
        assert_eq!(
            (p.do_scope, p.do_location, p.d1_session),
            (DoScope::Key, None, None)
        );
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
            (&[("stores", "kv,memcached")], "stores"),
            (&[("do_scope", "global")], "do_scope"),
            (&[("do_scope", "")], "do_scope"),
            (&[("do_location", "eu")], "do_location"),
            (&[("do_location", "WEUR")], "do_location"),
            (&[("d1_session", "bookmark")], "d1_session"),
            (&[("d1_session", "")], "d1_session"),
            (&[("key", "kvbench:redis:1")], "key"),
            (&[("key", "kvbench:")], "key"),
            (&[("stores", "r2"), ("key", &"k".repeat(1014))], "key"),
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
    fn new_store_parameters_and_limits() {
        let p = parse(&[
            ("do_scope", "shared"),
            ("do_location", "weur"),
            ("d1_session", "first-unconstrained"),
        ])
        .unwrap();
        assert_eq!(p.do_scope, DoScope::Shared);
        assert_eq!(p.do_location, Some(LocationHint::Weur));
        assert_eq!(p.d1_session, Some(D1Session::FirstUnconstrained));
        assert_eq!(p.options().do_location, Some(LocationHint::Weur));
        let p = parse(&[("do_location", "none"), ("d1_session", "none")]).unwrap();
        assert_eq!((p.do_location, p.d1_session), (None, None));
        // R2 keys are 1,024 bytes with the 11-byte namespace: 1,013 bytes of key fit.
        assert!(parse(&[("stores", "r2"), ("key", &"k".repeat(1013))]).is_ok());
        // The TTL minimum is the measured stores' (KV: 60 s).
        assert!(parse(&[("stores", "redis,upstash,do,d1,r2,cache"), ("ttl", "1")]).is_ok());
        let e = parse(&[("stores", "kv,redis"), ("ttl", "59")]).unwrap_err();
        assert_eq!(e.parameter, "ttl");
        assert!(
            e.message.contains("kv refuses less than 60 s"),
            "{}",
            e.message
        );
        // A var TTL below KV's minimum is fine until a request measures kv without a ttl.
        let d = Defaults::from_vars(|v| match v {
            "TTL" => Some("5".into()),
            "STORES" => Some("redis".into()),
            _ => None,
        })
        .unwrap();
        let e = Params::parse(&q(&[("stores", "kv")]), &d).unwrap_err();
        assert_eq!(e.parameter, "stores");
        let d = Defaults::from_vars(|v| (v == "DO_SCOPE").then(|| "shared".into())).unwrap();
        assert_eq!(d.do_scope, DoScope::Shared);
        let e = Defaults::from_vars(|v| (v == "D1_SESSION").then(|| "x".into())).unwrap_err();
        assert_eq!(e.parameter, "D1_SESSION");
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
