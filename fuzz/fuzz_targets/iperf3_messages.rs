//! The `iperf3_messages` fuzz target: its body is [`socklab_fuzz::iperf3_messages::run`] (src/iperf3_messages.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::iperf3_messages::run(data));
