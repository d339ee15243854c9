//! The `do` store's protocol between the worker and its Durable Object (which object holds a
//! key, where a new one goes, the `GET`/`PUT` requests), shared by both sides.

use percent_encoding::{percent_decode_str, utf8_percent_encode};

use crate::stores::http::PATH_SEGMENT;

/// Which object holds a key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DoScope {
    /// One object per key (named after it), created near where the key is first used: what a
    /// per-entity design does. Measures the hop to that key's object.
    #[default]
    Key,
    /// One object for every key: every request travels to the same object, whose single
    /// thread serialises them. Measures one hot, central object.
    Shared,
    /// One object per key and colo (`colo:IAD|kvbench:do:7`), created by the first request
    /// there: what a placed fleet member measures.
    Colo,
}

impl DoScope {
    pub fn as_str(self) -> &'static str {
        match self {
            DoScope::Key => "key",
            DoScope::Shared => "shared",
            DoScope::Colo => "colo",
        }
    }

    pub fn parse(name: &str) -> Option<DoScope> {
        [DoScope::Key, DoScope::Shared, DoScope::Colo]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// The object's name for `store_key`. Names cannot collide: the shared object's has no trailing
/// `:`, a colo's own is `colo:<colo>|<key>`, a hint's is `<hint>|<key>` (a hint applies only at
/// creation, so the key's own object would not be where `do_location` says).
pub fn object_name(
    scope: DoScope,
    location: Option<LocationHint>,
    colo: Option<&str>,
    store_key: &str,
) -> String {
    let name = match scope {
        DoScope::Key => store_key.to_string(),
        DoScope::Shared => SHARED_OBJECT.to_string(),
        DoScope::Colo => format!("colo:{}|{store_key}", colo.unwrap_or("unknown")),
    };
    match location {
        Some(hint) => format!("{}|{name}", hint.as_str()),
        None => name,
    }
}

/// The name of the one object of `do_scope=shared`.
pub const SHARED_OBJECT: &str = "kvbench:do";

/// Durable Object location hints as Cloudflare lists them (`sam`, `afr` and `me` objects are
/// created elsewhere: each probe's answer says where it ran).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocationHint {
    Wnam,
    Enam,
    Sam,
    Weur,
    Eeur,
    Apac,
    ApacNe,
    ApacSe,
    Oc,
    Afr,
    Me,
}

impl LocationHint {
    pub const ALL: [LocationHint; 11] = [
        LocationHint::Wnam,
        LocationHint::Enam,
        LocationHint::Sam,
        LocationHint::Weur,
        LocationHint::Eeur,
        LocationHint::Apac,
        LocationHint::ApacNe,
        LocationHint::ApacSe,
        LocationHint::Oc,
        LocationHint::Afr,
        LocationHint::Me,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LocationHint::Wnam => "wnam",
            LocationHint::Enam => "enam",
            LocationHint::Sam => "sam",
            LocationHint::Weur => "weur",
            LocationHint::Eeur => "eeur",
            LocationHint::Apac => "apac",
            LocationHint::ApacNe => "apac-ne",
            LocationHint::ApacSe => "apac-se",
            LocationHint::Oc => "oc",
            LocationHint::Afr => "afr",
            LocationHint::Me => "me",
        }
    }

    pub fn parse(name: &str) -> Option<LocationHint> {
        LocationHint::ALL.into_iter().find(|h| h.as_str() == name)
    }
}

/// The origin of requests to the object (never resolved: a stub routes them).
const ORIGIN: &str = "https://kvbench.do";

/// The path of the object's row count, for tests and operators (never a key's path: every
/// store key starts with `kvbench:`, whose `:` is percent-encoded).
pub const STATS_PATH: &str = "/.stats";

/// The URL that reads (`GET`) or writes (`PUT`, with `ttl_s`) `store_key` in its object.
pub fn url(store_key: &str, ttl_s: Option<u32>) -> String {
    let key = utf8_percent_encode(store_key, PATH_SEGMENT);
    match ttl_s {
        None => format!("{ORIGIN}/{key}"),
        Some(ttl) => format!("{ORIGIN}/{key}?ttl={ttl}"),
    }
}

/// What a request to the object asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Get { key: String },
    Put { key: String, ttl_s: u32 },
    Stats,
}

/// Parses a request's method, path and query (as the object receives them).
pub fn parse(method: &str, path: &str, query: Option<&str>) -> Result<Call, String> {
    if path == STATS_PATH {
        return Ok(Call::Stats);
    }
    let key = percent_decode_str(path.strip_prefix('/').unwrap_or(path))
        .decode_utf8()
        .map_err(|_| "the key is not UTF-8".to_string())?
        .into_owned();
    if key.is_empty() {
        return Err("no key in the path".into());
    }
    match method {
        "GET" => Ok(Call::Get { key }),
        "PUT" => {
            let ttl = query
                .unwrap_or("")
                .split('&')
                .find_map(|pair| pair.strip_prefix("ttl="))
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|t| *t > 0)
                .ok_or_else(|| "PUT needs ?ttl=<seconds>".to_string())?;
            Ok(Call::Put { key, ttl_s: ttl })
        }
        other => Err(format!("method {other} is not GET or PUT")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_round_trip_through_the_parser() {
        for key in ["kvbench:do:417", "kvbench:do:a b/c?d", "kvbench:do:€"] {
            let url = url(key, Some(60));
            let rest = url.strip_prefix(ORIGIN).unwrap();
            let (path, query) = rest.split_once('?').unwrap();
            assert_eq!(
                parse("PUT", path, Some(query)),
                Ok(Call::Put {
                    key: key.into(),
                    ttl_s: 60
                })
            );
            let get = self::url(key, None);
            let path = get.strip_prefix(ORIGIN).unwrap();
            assert_eq!(parse("GET", path, None), Ok(Call::Get { key: key.into() }));
            assert_ne!(path, STATS_PATH);
        }
        assert_eq!(parse("GET", STATS_PATH, None), Ok(Call::Stats));
        assert!(parse("PUT", "/k", None).is_err());
        assert!(parse("PUT", "/k", Some("ttl=0")).is_err());
        assert!(parse("DELETE", "/k", None).is_err());
        assert!(parse("GET", "/", None).is_err());
        assert!(parse("GET", "/%FF", None).is_err());
    }

    #[test]
    fn scopes_name_objects() {
        assert_eq!(
            object_name(DoScope::Key, None, Some("IAD"), "kvbench:do:7"),
            "kvbench:do:7"
        );
        assert_eq!(
            object_name(DoScope::Shared, None, None, "kvbench:do:7"),
            SHARED_OBJECT
        );
        let weur = Some(LocationHint::Weur);
        assert_eq!(
            object_name(DoScope::Key, weur, None, "kvbench:do:7"),
            "weur|kvbench:do:7"
        );
        assert_eq!(
            object_name(DoScope::Shared, Some(LocationHint::ApacNe), None, "x"),
            "apac-ne|kvbench:do"
        );
        // A colo's own objects: one per key and colo, never a key's or a hint's name.
        assert_eq!(
            object_name(DoScope::Colo, None, Some("IAD"), "kvbench:do:7"),
            "colo:IAD|kvbench:do:7"
        );
        assert_eq!(
            object_name(DoScope::Colo, weur, Some("IAD"), "kvbench:do:7"),
            "weur|colo:IAD|kvbench:do:7"
        );
        assert_eq!(DoScope::parse("colo"), Some(DoScope::Colo));
        assert_eq!(DoScope::parse("shared"), Some(DoScope::Shared));
        assert_eq!(DoScope::parse("global"), None);
        assert_eq!(LocationHint::parse("weur"), Some(LocationHint::Weur));
        assert_eq!(LocationHint::parse("eu"), None);
    }
}
