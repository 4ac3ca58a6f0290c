//! Counters, histograms, the report and trace sinks.

pub mod columns;
pub mod hist;
pub mod report;
pub mod series;
pub mod trace;

pub use hist::Hist;
