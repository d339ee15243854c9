//! The `/test` parameters, described once: name, the `[vars]` name of its default, what it
//! accepts, its built-in default and what it does. The parser ([`crate::measurement::params`]) reads the
//! bounds and names it accepts from here, `GET /` lists the table, and the parameter table of
//! `docs/parameters.md` is made from it (a test fails when they disagree).

use serde::Serialize;

/// What a parameter's value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum Accepts {
    /// A whole number from `min` to `max`, in `unit` (`""` or `"s"`).
    Int {
        min: u32,
        max: u32,
        unit: &'static str,
    },
    /// One of these names.
    OneOf { names: &'static [&'static str] },
    /// `none`, or one of these names.
    NoneOr { names: &'static [&'static str] },
    /// Text checked by its own rule, described in the parameter's `bounds`.
    Text,
}

/// One `/test` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Parameter {
    pub name: &'static str,
    /// The `[vars]` entry that sets its default for the deployment (and the probes).
    pub var: Option<&'static str>,
    /// The built-in default, as the docs show it.
    pub default: &'static str,
    pub accepts: Accepts,
    /// What else bounds it (after what `accepts` says), as the docs show it.
    pub also: &'static str,
    /// What it does.
    pub doc: &'static str,
}

// The bounds of the numeric parameters, which the parser checks.
pub const KEYS_MAX: u32 = 1_000_000;
pub const BYTES_MAX: u32 = 1_048_576;
/// The benchmark's own TTL bounds; a measured store may raise the minimum
/// ([`crate::spec::StoreSpec::ttl_min_s`]: Cloudflare KV refuses an `expirationTtl` below 60 s).
pub const TTL_MIN_S: u32 = 1;
pub const TTL_MAX_S: u32 = 86_400;
/// Cloudflare KV's smallest `cacheTtl`.
pub const CACHE_TTL_MIN_S: u32 = 30;
pub const CACHE_TTL_MAX_S: u32 = 31_536_000;
/// Longest `key` any measurement accepts, in bytes; a measured store may lower it
/// ([`crate::spec::StoreSpec::key_max_bytes`], namespace included).
pub const KEY_MAX_BYTES: usize = 2048;
pub const TIMEOUT_MIN_MS: u32 = 100;
pub const TIMEOUT_MAX_MS: u32 = 60_000;

/// The names `consistency` accepts.
pub const CONSISTENCIES: &[&str] = &["strong", "eventual"];
/// The names `do_scope` accepts.
pub const DO_SCOPES: &[&str] = &["key", "shared", "colo"];
/// The location hints `do_location` accepts (Cloudflare's data-location page).
pub const LOCATION_HINTS: &[&str] = &[
    "wnam", "enam", "sam", "weur", "eeur", "apac", "apac-ne", "apac-se", "oc", "afr", "me",
];
/// The constraints `d1_session` accepts.
pub const D1_SESSIONS: &[&str] = &["first-unconstrained", "first-primary"];

pub const KEYS: Parameter = Parameter {
    name: "keys",
    var: Some("KEYS"),
    default: "1000",
    accepts: Accepts::Int {
        min: 1,
        max: KEYS_MAX,
        unit: "",
    },
    also: "",
    doc: "key space for random keys",
};
pub const MIN_BYTES: Parameter = Parameter {
    name: "min_bytes",
    var: Some("MIN_BYTES"),
    default: "4096",
    accepts: Accepts::Int {
        min: 1,
        max: BYTES_MAX,
        unit: "",
    },
    also: ", ≤ `max_bytes`",
    doc: "smallest value written on a miss",
};
pub const MAX_BYTES: Parameter = Parameter {
    name: "max_bytes",
    var: Some("MAX_BYTES"),
    default: "65536",
    accepts: Accepts::Int {
        min: 1,
        max: BYTES_MAX,
        unit: "",
    },
    also: "; ≤ each measured store's value limit ([Stores](#stores): 65,536 with `denokv`)",
    doc: "largest value written on a miss",
};
pub const TTL: Parameter = Parameter {
    name: "ttl",
    var: Some("TTL"),
    default: "60",
    accepts: Accepts::Int {
        min: TTL_MIN_S,
        max: TTL_MAX_S,
        unit: "s",
    },
    also: "; ≥ 60 when `kv` is measured (KV refuses less)",
    doc: "expiry of written values",
};
pub const STORES: Parameter = Parameter {
    name: "stores",
    var: Some("STORES"),
    default: "all but `postgres`, `hyperdrive`",
    accepts: Accepts::Text,
    also: "comma list of `kv`, `upstash`, `denokv`, `do`, `d1`, `r2`, `cache`, `redis`, \
           `postgres`, `hyperdrive`",
    doc: "stores to measure; a store that is not configured reports `not_configured`",
};
pub const ORDER: Parameter = Parameter {
    name: "order",
    var: Some("ORDER"),
    default: "`random`",
    accepts: Accepts::Text,
    also: "`random` or a comma list of exactly the measured stores",
    doc: "measurement order; a list alone also selects the stores",
};
pub const CACHE_TTL: Parameter = Parameter {
    name: "cache_ttl",
    var: Some("CACHE_TTL"),
    default: "unset",
    accepts: Accepts::Int {
        min: CACHE_TTL_MIN_S,
        max: CACHE_TTL_MAX_S,
        unit: "s",
    },
    also: "",
    doc: "KV `cacheTtl` for the read",
};
pub const TIMEOUT_MS: Parameter = Parameter {
    name: "timeout_ms",
    var: Some("TIMEOUT_MS"),
    default: "10000",
    accepts: Accepts::Int {
        min: TIMEOUT_MIN_MS,
        max: TIMEOUT_MAX_MS,
        unit: "",
    },
    also: "",
    doc: "per-store, per-operation timeout",
};
pub const CONSISTENCY: Parameter = Parameter {
    name: "consistency",
    var: Some("CONSISTENCY"),
    default: "`strong`",
    accepts: Accepts::OneOf {
        names: CONSISTENCIES,
    },
    also: "",
    doc: "Deno KV read consistency (eventual reads may be served by a nearer replica)",
};
pub const DO_SCOPE: Parameter = Parameter {
    name: "do_scope",
    var: Some("DO_SCOPE"),
    default: "`key`",
    accepts: Accepts::OneOf { names: DO_SCOPES },
    also: "",
    doc: "Durable Objects: one object per key, one for all keys, or one per key and colo the \
          request ran in (`stores.do.near_colo` says which) ([Stores](#stores))",
};
pub const DO_LOCATION: Parameter = Parameter {
    name: "do_location",
    var: Some("DO_LOCATION"),
    default: "unset",
    accepts: Accepts::NoneOr {
        names: LOCATION_HINTS,
    },
    also: "",
    doc: "Durable Objects: an object of this hint's own, created with it as `locationHint` \
          (`stores.do.location_hint` says so)",
};
pub const D1_SESSION: Parameter = Parameter {
    name: "d1_session",
    var: Some("D1_SESSION"),
    default: "unset",
    accepts: Accepts::NoneOr { names: D1_SESSIONS },
    also: "",
    doc: "D1: run the read and the write in one Sessions API session with this constraint",
};
pub const KEY: Parameter = Parameter {
    name: "key",
    var: None,
    default: "random",
    accepts: Accepts::Text,
    also: "1–2,048 bytes and within each measured store's key limit, namespace and encoding \
           included ([Stores](#stores): 512 bytes with `kv`, 2,048 encoded with `denokv`, 1,013 \
           with `r2`); not `.` or `..`; not starting with `kvbench:`",
    doc: "a fixed key",
};

/// Every `/test` parameter, in the order `docs/parameters.md` lists them.
pub const ALL: [Parameter; 13] = [
    KEYS,
    MIN_BYTES,
    MAX_BYTES,
    TTL,
    STORES,
    ORDER,
    CACHE_TTL,
    TIMEOUT_MS,
    CONSISTENCY,
    DO_SCOPE,
    DO_LOCATION,
    D1_SESSION,
    KEY,
];

/// The parameter called `name`.
pub fn named(name: &str) -> Option<&'static Parameter> {
    ALL.iter().find(|p| p.name == name)
}

/// `1000000` as `1,000,000`.
fn thousands(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `a`, `b` or `c`.
fn alternatives(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

impl Parameter {
    /// What it accepts, as the docs' `bounds` column says it.
    pub fn bounds(&self) -> String {
        let accepts = match self.accepts {
            Accepts::Int { min, max, unit } => {
                let unit = if unit.is_empty() {
                    String::new()
                } else {
                    format!(" {unit}")
                };
                format!("{}–{}{unit}", thousands(min), thousands(max))
            }
            Accepts::OneOf { names } => alternatives(names),
            Accepts::NoneOr { names } => {
                let mut all = vec!["none"];
                all.extend_from_slice(names);
                alternatives(&all)
            }
            Accepts::Text => String::new(),
        };
        format!("{accepts}{}", self.also)
    }

    /// The default column: the built-in default and the var that overrides it.
    pub fn default_text(&self) -> String {
        match self.var {
            Some(var) => format!("{} (`{var}`)", self.default),
            None => self.default.to_string(),
        }
    }

    /// The parameter's row in `docs/parameters.md`'s table. `GET /` and the 400 messages show the
    /// same text with its link to the Stores section as it is; on the docs page that section is
    /// a page of its own, `stores.md`.
    pub fn docs_row(&self) -> String {
        format!(
            "| `{}` | {} | {} | {} |",
            self.name,
            self.default_text(),
            self.bounds(),
            self.doc
        )
        .replace("](#stores)", "](stores.md)")
    }

    /// The error for a value outside what it accepts: "expected …, got …".
    pub fn expected(&self, got: &str) -> String {
        let what = match self.accepts {
            Accepts::Int { min, max, .. } => format!("an integer from {min} to {max}"),
            Accepts::OneOf { names } => alternatives(names).replace('`', ""),
            Accepts::NoneOr { names } => {
                let mut all = vec!["none"];
                all.extend_from_slice(names);
                alternatives(&all).replace('`', "")
            }
            Accepts::Text => self.also.replace('`', ""),
        };
        format!("expected {what}, got {got:?}")
    }
}

/// `docs/parameters.md`'s parameter table: its header and a row per parameter.
pub fn docs_table() -> String {
    let mut out =
        String::from("| parameter | default | bounds | meaning |\n| --- | --- | --- | --- |\n");
    for p in &ALL {
        out.push_str(&p.docs_row());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::durable::{DoScope, LocationHint};
    use crate::stores::sql::D1Session;
    use crate::stores::store::Consistency;

    #[test]
    fn the_names_are_what_the_types_parse() {
        let all = |names: &[&str], parse: &dyn Fn(&str) -> bool| names.iter().all(|n| parse(n));
        assert!(all(CONSISTENCIES, &|n| Consistency::parse(n).is_some()));
        assert!(all(DO_SCOPES, &|n| DoScope::parse(n).is_some()));
        assert!(all(LOCATION_HINTS, &|n| LocationHint::parse(n).is_some()));
        assert!(all(D1_SESSIONS, &|n| D1Session::parse(n).is_some()));
        assert_eq!(LOCATION_HINTS.len(), LocationHint::ALL.len());
        let hints: Vec<&str> = LocationHint::ALL.iter().map(|h| h.as_str()).collect();
        assert_eq!(LOCATION_HINTS, &hints[..]);
    }

    #[test]
    fn the_defaults_shown_are_the_defaults() {
        use crate::measurement::params::{Defaults, Params};
        let defaults = Defaults::default();
        let none = Params::parse(&[], &defaults).unwrap();
        for p in &ALL {
            let value = p.default.trim_matches('`');
            let given = match value {
                // Not a value: the parameter is off (or random) unless given.
                "unset" | "random" => continue,
                // (`trim_matches` took the closing backtick.)
                "all but `postgres`, `hyperdrive" => {
                    let all_but: Vec<_> = crate::stores::store::StoreId::ALL
                        .into_iter()
                        .filter(|s| !matches!(s.as_str(), "postgres" | "hyperdrive"))
                        .collect();
                    assert_eq!(defaults.stores, all_but);
                    continue;
                }
                v => v,
            };
            let with = Params::parse(&[(p.name.to_string(), given.to_string())], &defaults)
                .unwrap_or_else(|e| panic!("{}={given}: {e}", p.name));
            assert_eq!(with, none, "{}'s default is not {given}", p.name);
        }
    }

    #[test]
    fn bounds_and_errors_read_from_the_table() {
        assert_eq!(KEYS.bounds(), "1–1,000,000");
        assert_eq!(CACHE_TTL.bounds(), "30–31,536,000 s");
        assert_eq!(CONSISTENCY.bounds(), "`strong` or `eventual`");
        assert_eq!(
            D1_SESSION.bounds(),
            "`none`, `first-unconstrained` or `first-primary`"
        );
        assert_eq!(
            DO_SCOPE.expected("global"),
            "expected key, shared or colo, got \"global\""
        );
        assert_eq!(named("ttl"), Some(&TTL));
        assert_eq!(named("nope"), None);
        let names: Vec<&str> = ALL.iter().map(|p| p.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }
}
