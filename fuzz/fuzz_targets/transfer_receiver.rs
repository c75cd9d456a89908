//! The `transfer_receiver` fuzz target: its body is [`socklab_fuzz::transfer_receiver::run`] (src/transfer_receiver.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::transfer_receiver::run(data));
