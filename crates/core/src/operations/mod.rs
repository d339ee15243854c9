//! The operations around the measurement: who may call what (`auth`), the probes' configuration
//! (`probes`), one probe's state machine (`probe`), one
//! shard of a run's archive as a machine (`shard`), what the probes may spend (`spend`), the
//! fleet of placed members (`fleet`), the run archive (`runs`), and reading kept answers by
//! window and page (`window`), the names that become part of an object's name (`name`), and
//! where code ran, from Cloudflare's trace (`trace`).

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
