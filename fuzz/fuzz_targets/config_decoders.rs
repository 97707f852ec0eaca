//! `cargo fuzz run config_decoders`: see ibi_fuzz::config_decoders and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ibi_fuzz::config_decoders(data);
});
