//! The `udp_datagram` fuzz target: its body is [`socklab_fuzz::udp_datagram::run`] (src/udp_datagram.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::udp_datagram::run(data));
