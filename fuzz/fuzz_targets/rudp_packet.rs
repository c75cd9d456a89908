//! The `rudp_packet` fuzz target: its body is [`socklab_fuzz::rudp_packet::run`] (src/rudp_packet.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::rudp_packet::run(data));
