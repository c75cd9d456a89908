//! The `ip_header` fuzz target: its body is [`socklab_fuzz::ip_header::run`] (src/ip_header.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::ip_header::run(data));
