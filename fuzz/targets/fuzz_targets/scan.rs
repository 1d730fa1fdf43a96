#![no_main]
//! fuzz-props' `scan` check on every input libFuzzer makes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(why) = fuzz_props::scan(data) {
        panic!("{why}");
    }
});
