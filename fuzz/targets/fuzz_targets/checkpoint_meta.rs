#![no_main]
//! fuzz-props' `checkpoint_meta` check on every input libFuzzer makes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(why) = fuzz_props::checkpoint_meta(data) {
        panic!("{why}");
    }
});
