//! The `sockperf_wire` fuzz target: its body is [`socklab_fuzz::sockperf_wire::run`] (src/sockperf_wire.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::sockperf_wire::run(data));
