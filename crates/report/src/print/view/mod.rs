//! The report's tables as plain data — rows, cells and notes, each figure at the precision every
//! printer shows — one module per table, each built once per render from the report and its
//! [`Summary`](crate::report::Summary). The text and the HTML printers lay these out; they decide
//! padding, markup and escaping, never a figure.

pub mod cell;
pub mod cost;
pub mod errors;
pub mod grid;
pub mod runs;
pub mod totals;
pub mod vantage;
