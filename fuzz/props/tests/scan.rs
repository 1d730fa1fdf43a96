//! `cfgcheck --scan`'s parser and judge on generated inputs, on stable Rust
//! in `cargo test` (the fuzzer runs the same check with libFuzzer): any
//! bytes, and Python built from the pieces the rules look for, so the
//! inputs reach past the parser into the rules.

use proptest::prelude::*;

/// Pieces of the code the scanner takes apart.
const TOKENS: &[&str] = &[
    "import torch\n",
    "import torch as t\n",
    "import torch.utils.checkpoint as cp\n",
    "from torch.utils.checkpoint import checkpoint as ckpt\n",
    "from torch.utils.checkpoint import *\n",
    "from os import environ\n",
    "torch.compile(",
    "t.compile(",
    "model.compile(",
    "@torch.compile(",
    "cp.checkpoint(",
    "ckpt(",
    "checkpoint_sequential(",
    ".gradient_checkpointing_enable()",
    "TrainingArguments(",
    "DataLoader(",
    "os.environ[",
    "os.environ.setdefault(",
    "os.environ.update(",
    "os.putenv(",
    "'CUDA_LAUNCH_BLOCKING'",
    "mode=",
    "options=",
    "backend=",
    "torch_compile_mode=",
    "gradient_checkpointing=",
    "num_workers=",
    "dataloader_num_workers=",
    "'reduce-overhead'",
    "\"max-autotune\"",
    "'cudagraphs'",
    "{'triton.cudagraphs': True}",
    "f'{x}'",
    "b'x'",
    "True",
    "None",
    "2",
    "0x10",
    "99999999999999999999999",
    "args.mode",
    "**kw",
    "'1'",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    ":",
    "if __name__ == '__main__':\n",
    "if debug:\n",
    "def f(x):\n",
    "    ",
    "\n",
    "# ",
    "\"\"\"",
    "\\",
    "é",
    "\u{feff}",
    "\r\n",
];

fn token_text() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..60).prop_map(|t| t.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn scan_takes_any_bytes(data in prop::collection::vec(any::<u8>(), 0..400)) {
        prop_assert_eq!(fuzz_props::scan(&data), Ok(()));
    }

    #[test]
    fn scan_takes_any_code_of_tokens(data in token_text()) {
        prop_assert_eq!(fuzz_props::scan(&data), Ok(()));
    }
}

#[test]
fn scan_takes_deep_nesting() {
    for open in ["(", "[", "{", "f(", "not ", "-", "lambda: "] {
        let mut text = "x = ".to_string() + &open.repeat(5_000);
        assert_eq!(fuzz_props::scan(text.as_bytes()), Ok(()), "{open}");
        text.push_str(&")".repeat(5_000));
        assert_eq!(fuzz_props::scan(text.as_bytes()), Ok(()), "{open}");
    }
    let nested_ifs: String = (0..2_000)
        .map(|i| format!("{}if x:\n", "    ".repeat(i)))
        .collect();
    assert_eq!(fuzz_props::scan(nested_ifs.as_bytes()), Ok(()));
}
