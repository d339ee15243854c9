//! Platform-free core of the benchmark worker: everything that decides *what* a `/test` call
//! measures lives here, behind traits, so it compiles for wasm32 and is tested natively with mocks.

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

pub mod answer;
pub mod auth;
pub mod budget;
pub mod cache;
pub mod clock;
pub mod denokv;
pub mod durable;
pub mod endpoint;
pub mod error;
pub mod fleet;
pub mod http;
pub mod in_flight;
pub mod measure;
pub mod parameter;
pub mod params;
pub mod postgres;
pub mod probe;
pub mod probes;
pub mod redis;
pub mod runs;
pub mod scram;
pub mod secret;
pub mod spec;
pub mod sql;
pub mod store;
pub mod sweep;
pub mod upstash;
pub mod value;

pub use answer::{Answer, ErrorBody, StoreResult};
pub use budget::Budget;
pub use clock::{Clock, Timer};
pub use denokv::{DenoKvStore, MetadataCache};
pub use endpoint::{handle, Call, Reply};
pub use error::{ErrorKind, StoreError};
pub use http::{HttpRequest, HttpResponse, HttpTransport};
pub use in_flight::InFlight;
pub use measure::{measure, Isolate, StoreList, StoreSet};
pub use params::{Defaults, Order, ParamError, Params};
pub use postgres::{PgUrl, PostgresStore};
pub use redis::{Connection, Connector, RedisStore, RedisUrl};
pub use spec::{StoreSpec, STORES};
pub use store::{Consistency, Options, Store, StoreId};
pub use upstash::UpstashStore;
pub use value::{Value, ValueGen};
