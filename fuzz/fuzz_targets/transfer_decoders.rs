//! The `transfer_decoders` fuzz target: its body is [`socklab_fuzz::transfer_decoders::run`] (src/transfer_decoders.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::transfer_decoders::run(data));
