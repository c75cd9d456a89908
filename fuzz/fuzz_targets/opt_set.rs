//! The `opt_set` fuzz target: its body is [`socklab_fuzz::opt_set::run`] (src/opt_set.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::opt_set::run(data));
