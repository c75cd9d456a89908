//! The lab's data model, at the bottom of the crate: parameters as data (`params`), what one
//! repetition measured (`sample`), what a metric is (`metric`) and the statistics of an
//! experiment as plain data (`stats`). It imports nothing else of the lab but the crate's
//! error type, so every other module may use it and none of it reaches up.

pub mod metric;
pub mod params;
pub mod record;
pub mod sample;
pub mod stats;
