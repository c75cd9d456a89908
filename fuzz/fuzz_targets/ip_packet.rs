//! The `ip_packet` fuzz target: its body is [`socklab_fuzz::ip_packet::run`] (src/ip_packet.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::ip_packet::run(data));
