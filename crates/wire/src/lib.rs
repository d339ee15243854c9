//! Every shape kvbench puts on the wire, defined once for both sides (the worker writes, the
//! CLI and report worker read); each derives `Serialize` and `Deserialize`, strict to write and
//! lenient to read, with one golden file per shape in `tests/golden/`.
//! - [`answer`]: `/test`'s JSON answer; [`kept`]: one kept answer (an NDJSON line);
//! - [`stream`]: a kept stream's control lines and reader; [`trace`]: a member's placement header;
//! - [`object`]: worker ↔ Durable Objects; [`report`]: worker ↔ report worker.

pub mod answer;
pub mod kept;
pub mod object;
pub mod report;
pub mod stream;
pub mod text;
pub mod trace;

pub use text::{Key, Name};
