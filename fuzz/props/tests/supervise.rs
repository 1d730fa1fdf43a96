//! supervise's readers and command expansion on generated inputs, on stable
//! Rust in `cargo test` (the fuzzers run the same checks with libFuzzer):
//! any bytes, and lines built from the tokens the parsers look for, so the
//! inputs reach past the first refusal.

use proptest::prelude::*;

/// Pieces of the lines the readers and the expansion take apart.
const TOKENS: &[&str] = &[
    "Epoch ",
    "Epoch 3/50 ",
    "| ",
    "Loss: ",
    "Val Loss: ",
    "R²: ",
    "Time: ",
    "1",
    "0.5",
    "-2e-05",
    "nan",
    "inf",
    "s",
    "%",
    ":",
    " ",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "'",
    "\"",
    ",",
    "epoch",
    "loss",
    "'eval_loss': ",
    "np.float64(",
    "tensor(",
    "=",
    "True",
    "None",
    "\\",
    "\r",
    "\x1b[0m",
    "\u{feff}",
    "é",
    "${",
    "${args}",
    "${envvar:",
    "SET",
    "env",
    "config",
    "args_json",
    "--lr=",
    "\n",
];

fn token_text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|t| t.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn readers_take_any_bytes(data in prop::collection::vec(any::<u8>(), 0..400)) {
        prop_assert_eq!(fuzz_props::readers(&data), Ok(()));
    }

    #[test]
    fn readers_take_any_line_of_tokens(data in token_text()) {
        prop_assert_eq!(fuzz_props::readers(&data), Ok(()));
    }

    #[test]
    fn command_takes_any_bytes(data in prop::collection::vec(any::<u8>(), 0..400)) {
        prop_assert_eq!(fuzz_props::command(&data), Ok(()));
    }

    #[test]
    fn command_takes_any_items_of_tokens(data in token_text()) {
        prop_assert_eq!(fuzz_props::command(&data), Ok(()));
    }
}
