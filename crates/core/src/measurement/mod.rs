//! One `/test` measurement: its parameters described once (`parameter`) and parsed (`params`),
//! the run over the stores (`measure`), the isolate's memory budget
//! (`budget`) and requests in flight (`in_flight`), the answer (`answer`) and the endpoint as a
//! pure function (`endpoint`).

pub mod answer;
pub mod budget;
pub mod endpoint;
pub mod in_flight;
pub mod measure;
pub mod parameter;
pub mod params;
