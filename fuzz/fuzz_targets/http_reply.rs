//! The `http_reply` fuzz target: its body is [`socklab_fuzz::http_reply::run`] (src/http_reply.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::http_reply::run(data));
