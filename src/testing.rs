//! What a `#[wasm_bindgen_test]` needs to call this crate's glue the way the worker does: the
//! `worker::Env` (and `Context`) of the request that runs the test, handed over by
//! `scripts/wasm-test-runner.mjs` inside workerd, plus small helpers shared by the binding tests.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use kvbench_core::stores::store::{Fetched, Options};
use kvbench_core::{DynStore, StoreError, Value};
use wasm_bindgen::{JsCast, JsValue};

fn global(name: &str) -> JsValue {
    let value = js_sys::Reflect::get(&js_sys::global(), &name.into()).unwrap_or(JsValue::UNDEFINED);
    assert!(
        !value.is_undefined(),
        "{name} is not set: this test needs the worker's bindings, so it runs inside workerd \
         through scripts/wasm-test-runner.mjs (cargo test --target wasm32-unknown-unknown)"
    );
    value
}

/// The environment of the test worker: the real bindings of wrangler.toml, emulated by Miniflare.
pub fn env() -> worker::Env {
    global("__kvbench_test_env").unchecked_into()
}

/// An environment with no binding and no var: every store is `not_configured`.
pub fn empty_env() -> worker::Env {
    js_sys::Object::new().unchecked_into()
}

/// A key no other test uses.
pub fn unique_key(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("getrandom");
    let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("kvbench:test:{prefix}:{id}")
}

/// A value of exactly `len` bytes, as the probe generates them.
pub fn value(len: usize) -> Value {
    Value::from_bytes(crate::bindings::seeded_gen().value(len))
}

/// The size of a hit, or `None` for a miss.
pub async fn read(store: &dyn DynStore, key: &str) -> Result<Option<u64>, StoreError> {
    match store.get(key, &Options::default()).await? {
        Fetched::Miss => Ok(None),
        Fetched::Hit(decode) => decode.finish().map(Some),
    }
}

/// Writes `value` the way the probe does: the write prepared first, then the put.
pub async fn write(
    store: &dyn DynStore,
    key: &str,
    value: &Value,
    ttl_s: u32,
) -> Result<(), StoreError> {
    let write = store.prepare(key, value, ttl_s)?;
    write.put(&Options::default()).await
}

/// Miss, write, then a hit of exactly the written size, for each size.
pub async fn miss_put_hit(store: &dyn DynStore, prefix: &str, sizes: &[usize]) {
    for &len in sizes {
        let key = unique_key(prefix);
        assert_eq!(
            read(store, &key).await.expect("first read"),
            None,
            "{prefix}: a new key is a miss"
        );
        write(store, &key, &value(len), 60).await.expect("write");
        assert_eq!(
            read(store, &key).await.expect("second read"),
            Some(len as u64),
            "{prefix}: a hit is sized as stored ({len} bytes)"
        );
    }
}

/// Bytes allocated in wasm memory (the test binary's allocator counts them): a value copied out
/// of JS into wasm shows up here, so a test can tell which calls copy and which do not.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size.saturating_sub(layout.size()), Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes allocated in wasm while `f` runs.
pub async fn allocated_during<T>(f: impl std::future::Future<Output = T>) -> (T, usize) {
    let before = ALLOCATED.load(Ordering::Relaxed);
    let out = f.await;
    (out, ALLOCATED.load(Ordering::Relaxed) - before)
}
