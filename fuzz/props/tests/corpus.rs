//! Every input in fuzz/corpus/TARGET/ (the seed corpus: shipped configs,
//! real reports, journals, logs) and fuzz/regressions/TARGET/ (each input a
//! fuzzer once broke a parser with) through its target's checks, on stable
//! Rust in `cargo test`; `just fuzz` runs the fuzzer itself.

use std::path::Path;

#[test]
fn every_corpus_input_and_regression_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut seen = 0;
    let mut broken = Vec::new();
    for (target, check) in fuzz_props::TARGETS {
        for dir in ["corpus", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
                continue;
            };
            for e in entries {
                let path = e.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                seen += 1;
                if let Err(why) = check(&data) {
                    broken.push(format!("{}: {why}", path.display()));
                }
            }
        }
    }
    assert!(seen >= 30, "only {seen} inputs: the corpus is missing");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
