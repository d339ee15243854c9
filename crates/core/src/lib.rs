//! Platform-free core of the benchmark worker: everything that decides *what* a `/test` call
//! measures lives here, behind traits, so it compiles for wasm32 and is tested natively with mocks.
//! Three planes: the store clients (`stores`), one measurement and its parameters
//! (`measurement`), and the operations around it — probes, fleet, run archive, who may call what
//! (`operations`); `spec` describes each store once, `error` and `clock` are shared by all.

// A panic in a wasm worker ends the instance and every request in flight in it (panic = abort:
// catching it needs panic = unwind, which on wasm32 takes a nightly toolchain). So the request
// path must not panic: these are errors here, outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod clock;
pub mod error;
pub mod measurement;
pub mod operations;
pub mod stores;

/// The store descriptions and the keep policy: their own crate (`kvbench-spec`, no store clients),
/// which the report links without the rest of the core.
pub use kvbench_spec as spec;

pub use clock::{Clock, Timer};
pub use error::{ErrorKind, ParamError, StoreError};
pub use measurement::answer::{Answer, ErrorBody, StoreResult};
pub use measurement::budget::Budget;
pub use measurement::endpoint::{handle, handle_fresh, Call, Reply};
pub use measurement::in_flight::InFlight;
pub use measurement::measure::{measure, Access, Isolate, Served, StoreList, StoreSet};
pub use measurement::params::{Defaults, Order, Params};
pub use spec::{StoreSpec, STORES};
pub use stores::denokv::{DenoKvStore, MetadataCache};
pub use stores::http::{HttpRequest, HttpResponse, HttpTransport};
pub use stores::postgres::{PgUrl, PostgresStore};
pub use stores::redis::{RedisStore, RedisUrl};
pub use stores::socket::{Connection, Connector};
pub use stores::store::{Consistency, DynStore, Options, Store, StoreId};
pub use stores::upstash::UpstashStore;
pub use stores::value::{Value, ValueGen};
