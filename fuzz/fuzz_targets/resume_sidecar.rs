//! The `resume_sidecar` fuzz target: its body is [`socklab_fuzz::resume_sidecar::run`] (src/resume_sidecar.rs), which the
//! corpus replay test (tests/corpus.rs) also runs on the stable toolchain.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| socklab_fuzz::resume_sidecar::run(data));
