//! What a store reports about its own calls (D1's `meta`, KV's `cacheStatus`), kept untouched
//! while spans are open and read here after (`Store::reported`). A field not given, `null` or
//! mistyped is absent: never a made-up 0.

use serde_json::Value;

use kvbench_wire::answer::round_ms;

/// What a store reported about one call (`stores.<name>.read_meta` / `write_meta`).
pub type CallMeta = kvbench_wire::answer::CallMeta<'static>;

/// What a store reported about this measurement's read and write, if anything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reported {
    pub read: Option<CallMeta>,
    pub write: Option<CallMeta>,
}

/// One D1 statement's `meta` as `JSON.stringify` wrote it (`D1Meta`); text that is no JSON
/// object reports nothing.
pub fn d1(json: &str) -> CallMeta {
    let Ok(Value::Object(meta)) = serde_json::from_str::<Value>(json) else {
        return CallMeta::default();
    };
    CallMeta {
        served_by_colo: meta
            .get("served_by_colo")
            .and_then(Value::as_str)
            .filter(|colo| !colo.is_empty())
            .map(|colo| colo.to_string().into()),
        served_by_primary: meta.get("served_by_primary").and_then(Value::as_bool),
        sql_ms: meta
            .get("timings")
            .and_then(|t| t.get("sql_duration_ms"))
            .and_then(Value::as_f64)
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .map(round_ms),
        attempts: meta
            .get("total_attempts")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        cache_status: None,
    }
}

/// A D1 batch's metas as one call: where it ran is the first's; the SQL time the sum, only when
/// every statement gave it; the attempts the most any took.
pub fn d1_batch<'a>(metas: impl IntoIterator<Item = &'a str>) -> CallMeta {
    let metas: Vec<CallMeta> = metas.into_iter().map(d1).collect();
    let Some(first) = metas.first() else {
        return CallMeta::default();
    };
    let sql_ms = metas
        .iter()
        .map(|m| m.sql_ms)
        .sum::<Option<f64>>()
        .map(round_ms);
    CallMeta {
        served_by_colo: first.served_by_colo.clone(),
        served_by_primary: first.served_by_primary,
        sql_ms,
        attempts: metas.iter().filter_map(|m| m.attempts).max(),
        cache_status: None,
    }
}

/// A KV read's `cacheStatus`: a non-empty string, or nothing (`null` in Miniflare).
pub fn kv(cache_status: Option<String>) -> CallMeta {
    CallMeta {
        cache_status: cache_status.filter(|s| !s.is_empty()).map(Into::into),
        ..CallMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A production D1 result's `meta` as `JSON.stringify` writes it (the fields of
    /// `@cloudflare/workers-types` `D1Meta`), and what Miniflare 5.20261117 writes.
    const PRODUCTION: &str = r#"{"served_by":"v3-prod","served_by_region":"WEUR","served_by_colo":"AMS","served_by_primary":false,"timings":{"sql_duration_ms":0.2741},"duration":0.2741,"changes":0,"last_row_id":0,"changed_db":false,"size_after":45056,"rows_read":1,"rows_written":0,"total_attempts":2}"#;
    const MINIFLARE: &str = r#"{"served_by":"miniflare.db","served_by_primary":true,"total_attempts":1,"timings":{"sql_duration_ms":0},"duration":0,"changes":0,"last_row_id":0,"changed_db":false,"size_after":16384,"rows_read":1,"rows_written":0}"#;

    #[test]
    fn a_d1_meta_reads_every_field_it_gives() {
        let meta = d1(PRODUCTION);
        assert_eq!(meta.served_by_colo.as_deref(), Some("AMS"));
        assert_eq!(meta.served_by_primary, Some(false));
        assert_eq!(meta.sql_ms, Some(0.274));
        assert_eq!(meta.attempts, Some(2));
        assert!(meta.retried());
        assert_eq!(meta.cache_status, None);
    }

    #[test]
    fn what_miniflare_leaves_out_stays_out_and_its_zero_stays_zero() {
        let meta = d1(MINIFLARE);
        assert_eq!(meta.served_by_colo, None, "Miniflare gives no colo");
        assert_eq!(meta.served_by_primary, Some(true));
        assert_eq!(
            meta.sql_ms,
            Some(0.0),
            "the emulator's own 0, carried as given"
        );
        assert_eq!(meta.attempts, Some(1));
        assert!(!meta.retried());
    }

    #[test]
    fn null_missing_or_mistyped_fields_are_absent_never_zero() {
        for (json, why) in [
            (r#"{}"#, "an empty meta"),
            (
                r#"{"served_by_colo":null,"served_by_primary":null,"timings":null,"total_attempts":null}"#,
                "nulls",
            ),
            (
                r#"{"served_by_colo":"","served_by_primary":"yes","timings":{"sql_duration_ms":"1"},"total_attempts":-1}"#,
                "wrong types, an empty colo, a negative count",
            ),
            (
                r#"{"timings":{"sql_duration_ms":-0.5},"total_attempts":1.5}"#,
                "a negative duration, a fractional count",
            ),
            (r#"{"timings":{}}"#, "timings without the SQL time"),
            ("null", "no object"),
            ("[1]", "no object"),
            ("", "no JSON"),
        ] {
            assert!(d1(json).is_empty(), "{why}: {json} gave {:?}", d1(json));
        }
    }

    #[test]
    fn a_batch_sums_its_sql_time_only_when_every_statement_gave_one() {
        let upsert = r#"{"served_by_colo":"AMS","served_by_primary":true,"timings":{"sql_duration_ms":0.5},"total_attempts":1}"#;
        let sweep = r#"{"served_by_colo":"AMS","served_by_primary":true,"timings":{"sql_duration_ms":0.25},"total_attempts":2}"#;
        let meta = d1_batch([upsert, sweep]);
        assert_eq!(meta.served_by_colo.as_deref(), Some("AMS"));
        assert_eq!(meta.served_by_primary, Some(true));
        assert_eq!(meta.sql_ms, Some(0.75));
        assert_eq!(meta.attempts, Some(2));
        let untimed = r#"{"served_by_primary":true,"total_attempts":1}"#;
        assert_eq!(d1_batch([upsert, untimed]).sql_ms, None);
        assert!(d1_batch([]).is_empty());
    }

    #[test]
    fn a_kv_cache_status_is_carried_only_when_given() {
        assert_eq!(kv(Some("HIT".into())).cache_status.as_deref(), Some("HIT"));
        assert!(kv(None).is_empty());
        assert!(kv(Some(String::new())).is_empty());
    }
}
