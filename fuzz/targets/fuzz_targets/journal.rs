#![no_main]
//! fuzz-props' `journal` check on every input libFuzzer makes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(why) = fuzz_props::journal(data) {
        panic!("{why}");
    }
});
