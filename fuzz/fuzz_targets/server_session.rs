//! The `server_session` fuzz target: its body is [`socklab_fuzz::server_session::run`] (src/server_session.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::server_session::run(data));
