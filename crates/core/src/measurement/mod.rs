//! One `/test` measurement: `parameter` and `params`, the run (`measure`), the isolate's
//! `budget` and `in_flight`, the `answer` and the `endpoint` as a pure function.

pub mod answer;
pub mod budget;
pub mod endpoint;
pub mod in_flight;
pub mod measure;
pub mod parameter;
pub mod params;
