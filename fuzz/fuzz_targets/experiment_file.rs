//! The `experiment_file` fuzz target: its body is [`socklab_fuzz::experiment_file::run`] (src/experiment_file.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::experiment_file::run(data));
