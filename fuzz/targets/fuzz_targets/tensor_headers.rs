#![no_main]
//! fuzz-props' `tensor_headers` check on every input libFuzzer makes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(why) = fuzz_props::tensor_headers(data) {
        panic!("{why}");
    }
});
