//! The `link_check` fuzz target: its body is [`socklab_fuzz::link_check::run`] (src/link_check.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::link_check::run(data));
