#![no_main]
//! fuzz-props' `readers` check on every input libFuzzer makes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(why) = fuzz_props::readers(data) {
        panic!("{why}");
    }
});
