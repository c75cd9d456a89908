//! The `workload_params` fuzz target: its body is [`socklab_fuzz::workload_params::run`] (src/workload_params.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::workload_params::run(data));
