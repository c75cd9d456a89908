//! The `tun_offload` fuzz target: its body is [`socklab_fuzz::tun_offload::run`] (src/tun_offload.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::tun_offload::run(data));
