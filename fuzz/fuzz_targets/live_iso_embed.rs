//! `cargo fuzz run live_iso_embed`: see ibi_fuzz::live_iso_embed and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ibi_fuzz::live_iso_embed(data);
});
