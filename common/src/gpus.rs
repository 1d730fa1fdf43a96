//! The GPU profiles that ship inside the tools (configs/gpus/*.yaml,
//! embedded at build time, so the pip wheel, which has no configs/, has
//! them too) and what a `--gpu` value (memdiag's `--from`) names: a file
//! when it holds a `/`, ends in .yaml, .yml or .json, or is `-` (stdin);
//! else a profile's name: its file's stem (`t4`, `a100-40gb`) or the part
//! before the stem's first `-` when one profile alone has it (`a100`).

use crate::bad_input;
use crate::input::{self, Input};
use std::path::Path;

/// Each profile's name (its file's stem) and text, in name order.
pub const PROFILES: [(&str, &str); 3] = [
    (
        "a100-40gb",
        include_str!("../../configs/gpus/a100-40gb.yaml"),
    ),
    (
        "h100-80gb",
        include_str!("../../configs/gpus/h100-80gb.yaml"),
    ),
    ("t4", include_str!("../../configs/gpus/t4.yaml")),
];

/// The names `--gpu` takes, for messages: each profile's, with its short
/// form where it has one (`a100-40gb (a100)`).
pub fn names() -> String {
    PROFILES
        .iter()
        .map(|(name, _)| match short(name) {
            Some(s) => format!("{name} ({s})"),
            None => name.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How to name a target GPU, for messages that lack one: `--gpu` with a
/// built-in profile's name or a saved report's file.
pub fn how_to_name() -> String {
    format!(
        "give --gpu NAME (a built-in GPU profile: {}) or --gpu FILE (a saved memdiag report)",
        names()
    )
}

/// `--gpu`'s help in cfgcheck and verify-fixes.
pub fn help() -> String {
    format!(
        "The target GPU, instead of memdiag's report on stdin: a built-in profile ({}) or a saved report's file (a value holding a `/` or ending in .yaml or .json)",
        names()
    )
}

/// A profile's short name: its stem before the first `-`, when no other
/// profile's stem starts the same.
fn short(name: &str) -> Option<&str> {
    let (head, _) = name.split_once('-')?;
    let unique = PROFILES
        .iter()
        .filter(|(n, _)| n.split('-').next() == Some(head))
        .count()
        == 1;
    unique.then_some(head)
}

/// The profile `name` names, by its stem or its short name.
pub fn profile(name: &str) -> Option<(&'static str, &'static str)> {
    PROFILES
        .iter()
        .find(|(n, _)| *n == name || short(n) == Some(name))
        .copied()
}

/// Whether a `--gpu` value is a file rather than a profile's name.
pub fn is_file(value: &Path) -> bool {
    let s = value.to_string_lossy();
    s == "-"
        || s.contains('/')
        || [".yaml", ".yml", ".json"]
            .iter()
            .any(|ext| s.to_ascii_lowercase().ends_with(ext))
}

/// The text a `--gpu` value (or memdiag's `--from`) stands for: the file it
/// names, or the built-in profile. An unknown name is bad input that lists
/// the known ones.
pub fn read(value: &Path) -> anyhow::Result<Input> {
    if is_file(value) {
        return input::read(value);
    }
    let asked = value.to_string_lossy();
    match profile(&asked) {
        Some((name, text)) => Ok(Input {
            name: format!("the built-in {name} profile"),
            text: text.to_string(),
        }),
        None => Err(bad_input!(
            "no GPU profile named {asked:?}: the built-in ones are {}; a file is read when the name holds a `/` or ends in .yaml or .json (./{asked}.yaml)",
            names()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;

    #[test]
    fn every_file_in_configs_gpus_is_built_in_and_reads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/gpus");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let built_in: Vec<&str> = PROFILES.iter().map(|(n, _)| *n).collect();
        assert_eq!(on_disk, built_in, "add the new profile to PROFILES");
        for (name, _) in PROFILES {
            let report = Report::parse(&read(Path::new(name)).unwrap()).unwrap();
            assert_eq!(report.gpus.len(), 1, "{name}");
        }
    }

    #[test]
    fn names_short_names_and_files() {
        assert_eq!(profile("t4").unwrap().0, "t4");
        assert_eq!(profile("a100").unwrap().0, "a100-40gb");
        assert_eq!(profile("h100-80gb").unwrap().0, "h100-80gb");
        assert!(profile("a100-80gb").is_none());
        assert_eq!(names(), "a100-40gb (a100), h100-80gb (h100), t4");
        for file in [
            "-",
            "t4.yaml",
            "./t4",
            "configs/gpus/t4.yaml",
            "r.JSON",
            "x.yml",
        ] {
            assert!(is_file(Path::new(file)), "{file}");
        }
        assert!(!is_file(Path::new("t4")));
    }

    #[test]
    fn an_unknown_name_is_bad_input_naming_the_known_ones() {
        let e = read(Path::new("v100")).err().unwrap();
        assert_eq!(crate::exit::code_of(&e), crate::exit::BAD_INPUT);
        let message = format!("{e:#}");
        assert!(
            message.contains("no GPU profile named \"v100\""),
            "{message}"
        );
        assert!(
            message.contains("a100-40gb (a100), h100-80gb (h100), t4"),
            "{message}"
        );
        // A file that is not there is the file's error, not a name's.
        let e = read(Path::new("v100.yaml")).err().unwrap();
        assert!(format!("{e:#}").contains("v100.yaml: cannot open"), "{e:#}");
    }
}
