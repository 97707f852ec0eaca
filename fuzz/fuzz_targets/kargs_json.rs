//! `cargo fuzz run kargs_json`: see ibi_fuzz::kargs_json and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ibi_fuzz::kargs_json(data);
});
