//! The `pcapng` fuzz target: its body is [`socklab_fuzz::pcapng::run`] (src/pcapng.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::pcapng::run(data));
