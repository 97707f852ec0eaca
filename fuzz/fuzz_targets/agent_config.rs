//! `cargo fuzz run agent_config`: see ibi_fuzz::agent_config and docs/fuzzing.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = ibi_fuzz::agent_config(data);
});
