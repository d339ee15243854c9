//! What only runs on wasm32: the CSPRNG seed through getrandom's `crypto.getRandomValues`
//! backend, value generation at sizes past its 64 KiB chunk, and the answers the worker builds.

use kvbench_core::measurement::answer::{Answer, StoreResult};
use kvbench_core::measurement::params::Defaults;
use kvbench_core::{ErrorKind, StoreError, StoreId};
use wasm_bindgen_test::wasm_bindgen_test;

use crate::bindings::seeded_gen;
use crate::respond;

#[wasm_bindgen_test]
fn getrandom_seeds_differ_per_generator() {
    let a = seeded_gen().value(64);
    let b = seeded_gen().value(64);
    assert_ne!(a, b, "two isolates must not share a value stream");
}

#[wasm_bindgen_test]
fn getrandom_fills_more_than_64_kib() {
    // workerd refuses getRandomValues buffers over 65,536 bytes; getrandom must chunk.
    let mut buf = vec![0u8; 200_000];
    getrandom::fill(&mut buf).expect("getrandom");
    assert!(buf[65_536..].iter().any(|b| *b != 0));
    assert!(buf[..65_536].iter().any(|b| *b != 0));
}

#[wasm_bindgen_test]
fn values_of_every_size_are_exact_printable_ascii() {
    let mut gen = seeded_gen();
    for len in [1usize, 4096, 65_535, 65_536, 65_537, 300_000, 1_048_576] {
        let v = gen.value(len);
        assert_eq!(v.len(), len);
        assert!(v.iter().all(u8::is_ascii_graphic));
        // What a JS consumer sees: the same length as a string.
        let s = js_sys::JsString::from(std::str::from_utf8(&v).unwrap());
        assert_eq!(s.length() as usize, len);
    }
}

#[wasm_bindgen_test]
fn answers_serialize_on_wasm_like_on_the_host() {
    let mut a = Answer::new("9".into(), "local".into(), 1);
    a.push(
        StoreId::Kv,
        StoreResult {
            read_ms: Some(1.5),
            hit: Some(true),
            value_bytes: Some(65_537),
            ..Default::default()
        },
    );
    let v: serde_json::Value = serde_json::from_str(&a.to_json()).unwrap();
    assert_eq!(v["stores"]["kv"]["value_bytes"], 65_537);
    assert_eq!(v["kvLatency"], 1.5);
    assert_eq!(v["redisLatency"], serde_json::Value::Null);
}

/// Every store configured but one (`which`), as `/` takes them.
fn all_but(which: &[StoreId]) -> Vec<(StoreId, Result<(), StoreError>)> {
    StoreId::ALL
        .into_iter()
        .map(|id| {
            let state = if which.contains(&id) {
                Err(StoreError::new(
                    ErrorKind::NotConfigured,
                    format!("{} is missing", id.as_str()),
                ))
            } else {
                Ok(())
            };
            (id, state)
        })
        .collect()
}

#[wasm_bindgen_test]
fn index_describes_config_without_secrets() {
    let body = respond::index(
        Ok(Defaults::default()),
        &all_but(&[StoreId::Upstash, StoreId::DenoKv]),
        kvbench_core::operations::auth::TokenConfig::Required("t".into()),
        false,
        serde_json::json!({ "requests": 1 }),
        true,
        respond::provenance(Some(r#"{"commit":"0123abc","wrangler":"4.1.0"}"#)),
    );
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["provenance"]["commit"], "0123abc");
    assert_eq!(v["provenance"]["wrangler"], "4.1.0");
    assert_eq!(respond::provenance(None), serde_json::Value::Null);
    assert_eq!(
        respond::provenance(Some("[1]"))["error"],
        "KVBENCH_PROVENANCE is not a JSON object"
    );
    assert_eq!(v["stores"]["upstash"]["configured"], false);
    assert_eq!(
        v["stores"]["upstash"]["not_configured"],
        "upstash is missing"
    );
    assert_eq!(v["stores"]["denokv"]["configured"], false);
    assert_eq!(v["stores"]["kv"]["configured"], true);
    assert_eq!(v["stores"]["r2"]["key_namespace"], "kvbench:r2:");
    assert_eq!(
        v["stores"]["do"]["billing"]["write"][1]["unit"],
        "SQLite row written"
    );
    assert_eq!(v["defaults"]["consistency"], "strong");
    assert_eq!(v["defaults"]["do_scope"], "key");
    assert_eq!(v["defaults"]["stores"].as_array().unwrap().len(), 8);
    assert_eq!(v["auth"]["bearer_token_required"], true);
    assert_eq!(v["defaults"]["ttl"], 60);
    assert_eq!(v["defaults"]["order"], "random");
    assert_eq!(v["isolate"]["requests"], 1);
    let blank = respond::index(
        Ok(Defaults::default()),
        &all_but(&[]),
        kvbench_core::operations::auth::TokenConfig::Blank,
        false,
        serde_json::Value::Null,
        true,
        serde_json::Value::Null,
    );
    let v: serde_json::Value = serde_json::from_str(&blank).unwrap();
    assert_eq!(
        v["auth"]["bearer_token_required"], true,
        "a blank token never reads as open"
    );
    assert!(v["auth"]["error"].as_str().unwrap().contains("BENCH_TOKEN"));
    let closed = respond::index(
        Ok(Defaults::default()),
        &all_but(&[]),
        kvbench_core::operations::auth::TokenConfig::Open,
        false,
        serde_json::Value::Null,
        true,
        serde_json::Value::Null,
    );
    let v: serde_json::Value = serde_json::from_str(&closed).unwrap();
    assert_eq!(v["auth"]["bearer_token_required"], false);
    assert_eq!(v["auth"]["open"], false);
    assert!(
        v["auth"]["without_token"]
            .as_str()
            .unwrap()
            .contains("answer 403 naming BENCH_TOKEN (closed)"),
        "no token never reads as open to anyone: {}",
        v["auth"]
    );
    let open = respond::index(
        Ok(Defaults::default()),
        &all_but(&[]),
        kvbench_core::operations::auth::TokenConfig::Open,
        true,
        serde_json::Value::Null,
        true,
        serde_json::Value::Null,
    );
    let v: serde_json::Value = serde_json::from_str(&open).unwrap();
    assert_eq!(v["auth"]["open"], true);
    assert!(v["auth"]["without_token"]
        .as_str()
        .unwrap()
        .contains("anyone may call /test"));
}

#[wasm_bindgen_test]
fn colo_is_local_without_cf() {
    let req = worker::web_sys::Request::new_with_str("https://example.com/test")
        .expect("a plain Request");
    assert_eq!(crate::bindings::colo(&req), "local");
}

#[wasm_bindgen_test]
fn d1_values_are_sized_as_stored() {
    use wasm_bindgen::JsValue;
    // Text (how this worker writes), a BLOB (D1 returns an array of byte values), an ArrayBuffer.
    assert_eq!(
        crate::stores::d1::stored_len(&JsValue::from_str("héllo")),
        Ok(6)
    );
    let blob = js_sys::Array::new();
    for b in [1, 2, 255] {
        blob.push(&JsValue::from(b));
    }
    assert_eq!(crate::stores::d1::stored_len(&blob.into()), Ok(3));
    assert_eq!(
        crate::stores::d1::stored_len(&js_sys::ArrayBuffer::new(7).into()),
        Ok(7)
    );
    assert!(crate::stores::d1::stored_len(&JsValue::from(5)).is_err());
}

#[wasm_bindgen_test]
fn json_answers_carry_their_status_and_headers() {
    let r = respond::json_with(503, "{\"a\":1}", &[("Retry-After", "1")]).unwrap();
    assert_eq!(r.status_code(), 503);
    let h = r.headers();
    assert_eq!(h.get("Retry-After").unwrap().as_deref(), Some("1"));
    assert_eq!(
        h.get("Content-Type").unwrap().as_deref(),
        Some("application/json")
    );
    assert_eq!(h.get("Cache-Control").unwrap().as_deref(), Some("no-store"));
    let plain = respond::json(200, "{}").unwrap();
    assert_eq!(
        plain.headers().get("Retry-After").unwrap(),
        None,
        "sets do not mix"
    );
}

/// The executor wakes tasks with promise jobs, not `queueMicrotask` (`microtasks`): with
/// `globalThis.queueMicrotask` replaced by a counter, awaiting promises calls it not once —
/// and the runtime's own `queueMicrotask` is still there for everything else.
#[wasm_bindgen_test]
async fn the_executor_does_not_call_queue_microtask() {
    use std::cell::Cell;
    use std::rc::Rc;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::{JsCast, JsValue};

    // The instance's start hook (`#[event(start)]`, as in the deployed worker) set the executor
    // up before the harness ran its first future.
    let global: js_sys::Object = js_sys::global().unchecked_into();
    let key = JsValue::from_str("queueMicrotask");
    let original = js_sys::Reflect::get(&global, &key).unwrap();
    assert!(
        original.is_function(),
        "queueMicrotask is the runtime's again"
    );
    let calls = Rc::new(Cell::new(0u32));
    let counted = calls.clone();
    let real: js_sys::Function = original.clone().unchecked_into();
    let counter = Closure::<dyn FnMut(JsValue)>::new(move |f: JsValue| {
        counted.set(counted.get() + 1);
        let _ = real.call1(&JsValue::UNDEFINED, &f);
    });
    js_sys::Reflect::set(&global, &key, counter.as_ref()).unwrap();
    for i in 0..5 {
        let p = js_sys::Promise::resolve(&JsValue::from(i));
        let v = worker::wasm_bindgen_futures::JsFuture::from(p)
            .await
            .unwrap();
        assert_eq!(v, JsValue::from(i));
    }
    // Back as it was: the counter was an own property over the global scope's method.
    js_sys::Reflect::delete_property(&global, &key).unwrap();
    if !js_sys::Reflect::get(&global, &key).unwrap().is_function() {
        js_sys::Reflect::set(&global, &key, &original).unwrap();
    }
    assert_eq!(calls.get(), 0, "five awaits, no queueMicrotask call");
}

/// SASLprep with the runtime's NFKC (`String.prototype.normalize`) prepares passwords as the
/// `unicode-normalization` tables do: RFC 4013's examples and compatibility forms, composed and
/// decomposed letters, Hangul.
#[wasm_bindgen_test]
fn saslprep_with_the_runtimes_nfkc() {
    use kvbench_core::stores::scram::{nfkc_tables, saslprep};
    let nfkc = crate::stores::postgres::nfkc;
    assert_eq!(saslprep("I\u{00AD}X", nfkc).as_deref(), Some("IX"));
    assert_eq!(saslprep("\u{00AA}", nfkc).as_deref(), Some("a"));
    assert_eq!(saslprep("\u{2168}", nfkc).as_deref(), Some("IX"));
    assert_eq!(saslprep("\u{0007}", nfkc), None);
    assert_eq!(saslprep("\u{0627}\u{0031}", nfkc), None);
    for s in [
        "pässwörd",
        "pa\u{0308}sswo\u{0308}rd",
        "\u{fb01}\u{ff21}\u{3000}x",
        "\u{1100}\u{1161}\u{ac00}",
        "caf\u{e9} \u{a0}na\u{ef}ve",
        "\u{5d0}\u{5d1}",
    ] {
        assert_eq!(saslprep(s, nfkc), saslprep(s, nfkc_tables), "{s:?}");
        assert_eq!(nfkc(s), nfkc_tables(s), "{s:?}");
    }
}
