//! The operations around the measurement: `auth`, the probes' configuration (`probes`), a
//! probe's and a run shard's machines (`probe`, `shard`), `spend`, the `fleet`, the run archive
//! (`runs`), kept answers by `window`, object `name`s, and where code ran (`trace`).

pub mod auth;
pub mod fleet;
pub mod name;
pub mod probe;
pub mod probes;
pub mod runs;
pub mod shard;
pub mod spend;
pub mod trace;
pub mod window;
