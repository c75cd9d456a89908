//! `socklab-lab`: the Spec (plans of workloads), the Runner, the Store (SQLite), reports and
//! built-in suites. Every measuring command of socklab builds a [`plan::Plan`] and hands it to
//! [`runner::run_plan`]; every report reads the [`store::Store`].

pub mod charts;
pub mod child;
pub mod clock;
pub mod columns;
pub mod compare;
pub mod describe;
pub mod dryrun;
pub mod error;
pub mod facts;
pub mod file;
pub mod flags;
pub mod glance;
pub mod headline;
pub mod hosts;
pub mod html;
pub mod key_marks;
pub mod live;
pub mod markdown;
pub mod md_escape;
pub mod model;
pub mod output;
pub mod output_json;
pub mod plan;
pub mod plan_notice;
pub mod prometheus;
pub mod report;
pub mod reproduce;
pub mod resources;
pub mod roles;
pub mod runner;
pub mod scale;
pub mod series;
pub mod series_charts;
pub mod series_export;
pub mod session;
pub mod store;
pub mod store_runs;
pub mod store_series;
pub mod suites;
pub mod summary;
pub mod svg;
pub mod table;
pub mod workload;

#[cfg(test)]
mod columns_tests;
#[cfg(test)]
mod export_tests;
#[cfg(test)]
mod noise_tests;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod trust_tests;

pub use error::LabError;
pub use socklab_units::text;
