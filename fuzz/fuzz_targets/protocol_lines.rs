//! The `protocol_lines` fuzz target: its body is [`socklab_fuzz::protocol_lines::run`] (src/protocol_lines.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::protocol_lines::run(data));
