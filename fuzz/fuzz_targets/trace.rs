//! The `trace` fuzz target: its body is [`socklab_fuzz::trace::run`] (src/trace.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::trace::run(data));
