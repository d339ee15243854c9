//! Every shape kvbench puts on the wire, defined once and used by both sides: the worker and
//! its probes write them (`kvbench-core`, the worker), kvbench and the report worker read them
//! (`kvbench-report`, `kvbench`).
//!
//! - [`answer`]: the JSON answer of `/test`;
//! - [`kept`]: one kept answer of a probe or a run (an NDJSON line);
//! - [`stream`]: a kept-answers stream's control lines (`end`, `error`) and its reader;
//! - [`object`]: what the worker and its Durable Objects say to each other (arm, status);
//! - [`report`]: what the worker and the report worker say to each other (the render and bill
//!   queries, the bill's head);
//! - [`trace`]: the header a fleet member says where its trace placed it in.
//!
//! Each shape is one struct that derives both `Serialize` and `Deserialize`, so a field added
//! for the writer is read by the reader (or fails to compile where a reader builds its own
//! view with an exhaustive destructuring). The writer is strict (typed names, every field
//! written); the reader is lenient where older or newer writers differ (absent fields take
//! their default, unknown fields are ignored, unknown store and error names are kept as text).
//! `tests/golden/` holds one file per shape, written by these types and read back by them.

pub mod answer;
pub mod kept;
pub mod object;
pub mod report;
pub mod stream;
pub mod text;
pub mod trace;

pub use text::{Key, Name};
