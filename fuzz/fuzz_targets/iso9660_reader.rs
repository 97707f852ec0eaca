//! `cargo fuzz run iso9660_reader`: see ibi_fuzz::iso9660_reader and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ibi_fuzz::iso9660_reader(data);
});
