//! The `iperf3_udp` fuzz target: its body is [`socklab_fuzz::iperf3_udp::run`] (src/iperf3_udp.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::iperf3_udp::run(data));
