#![no_main]
//! fuzz-props' `any_config` check on every input libFuzzer makes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(why) = fuzz_props::any_config(data) {
        panic!("{why}");
    }
});
