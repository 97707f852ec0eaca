//! `cargo fuzz run cpio_reader`: see ibi_fuzz::cpio_reader and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ibi_fuzz::cpio_reader(data);
});
