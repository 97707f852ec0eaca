//! `cargo fuzz run seed_manifest`: see ibi_fuzz::seed_manifest and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ibi_fuzz::seed_manifest(data);
});
