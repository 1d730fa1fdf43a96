//! The words a user meets speak the user's language: no message, `--help`
//! text, catalogue entry or built-in text of any tool names the field
//! reports this project grew from (../shared/seeds: "seed 004", "the seeds'
//! model", their "Option A/B/C"). A user has never read them; the docs say
//! where a rule came from. `seed` as a hyper-parameter (the random seed) is
//! the user's own word and is not matched.

use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::bin;

/// The field reports' words in `text`, each with a little context.
fn field_report_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let bytes = lower.as_bytes();
    let mut hits = Vec::new();
    for (at, _) in lower.match_indices("seed") {
        let rest = &lower[at + 4..];
        let numbered = |r: &str| {
            let r = r.trim_start_matches(['s', ' ', '-', '_']);
            r.starts_with(|c: char| c.is_ascii_digit())
        };
        let word_start = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        if word_start
            && (numbered(rest)
                || rest.starts_with("s'")
                || (rest.starts_with('s') && lower[..at].ends_with("the ")))
        {
            hits.push(context(text, at));
        }
    }
    for (at, _) in lower.match_indices("option ") {
        let after = &text[at + 7..];
        let letter = after.chars().next();
        let ends = after.chars().nth(1).is_none_or(|c| !c.is_alphanumeric());
        if matches!(letter, Some('A' | 'B' | 'C')) && ends {
            hits.push(context(text, at));
        }
    }
    hits
}

fn context(text: &str, at: usize) -> String {
    let mut start = at.saturating_sub(40);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 40).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    text[start..end].replace('\n', " ")
}

#[test]
fn the_matcher_finds_the_reports_words_and_not_the_random_seed() {
    for said in [
        "fragmentation ends long runs (seed 004)",
        "Seed 001's crash",
        "the seeds' model",
        "seeds 000-003",
        "as the seeds did",
        "(seed 001, Option A)",
        "configs/sweeps/seed004.yaml",
    ] {
        assert!(!field_report_words(said).is_empty(), "{said}");
    }
    for fine in [
        "seed: 42",
        "the config's seed",
        "--seed N: the random seed",
        "data_seed",
        "reseeded from (seed, epoch)",
        "Option<u32>",
        "an option a user gives",
    ] {
        assert_eq!(field_report_words(fine), Vec::<String>::new(), "{fine}");
    }
}

/// Every entry of the catalogues the tools print from: the known failures
/// (`cfgcheck --explain`, `train run`'s verdicts), the rules' summaries and
/// help, and the environment fixes `train run` applies with their reasons.
#[test]
fn the_catalogues_speak_the_users_words() {
    let mut texts: Vec<(String, String)> = Vec::new();
    for k in diagnose::failures::KNOWN {
        for (field, text) in [
            ("title", k.title),
            ("cause", k.cause),
            ("fix", k.fix),
            ("program_fix", k.program_fix),
        ] {
            texts.push((format!("failures::KNOWN {} {field}", k.id), text.into()));
        }
    }
    for id in common::wire::hazard::HazardId::ALL {
        texts.push((format!("{id} summary"), id.summary().into()));
        texts.push((format!("{id} help"), id.help().into()));
    }
    let none = |_: &str| None;
    let user_set =
        |k: &str| (k == "PYTORCH_CUDA_ALLOC_CONF").then(|| "max_split_size_mb:128".into());
    for torch in [None, Some((2, 10, 0)), Some((2, 13, 0))] {
        for get in [&none as &dyn Fn(&str) -> Option<String>, &user_set] {
            let wants = supervise::env::Wants {
                gpu: Some("0"),
                threads: Some(2),
                ranks: 1,
                launch_blocking: true,
            };
            for said in supervise::env::fixes(get, torch, &wants).said {
                texts.push(("supervise::env::fixes".into(), said));
            }
        }
    }
    let found: Vec<String> = texts
        .iter()
        .flat_map(|(what, text)| {
            field_report_words(text)
                .into_iter()
                .map(move |w| format!("{what}: …{w}…"))
        })
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Every `--help` of every tool and subcommand, as clap prints it (the
/// `///` comments of the options included).
#[test]
fn every_help_speaks_the_users_words() {
    let runs: &[(&str, &[&str])] = &[
        ("memdiag", &[]),
        ("cfgcheck", &[]),
        ("verify-fixes", &[]),
        ("train", &[]),
        ("train", &["run"]),
        ("train", &["sweep"]),
        ("train", &["info"]),
        ("train", &["bench"]),
        ("train", &["check-data"]),
    ];
    let mut found = Vec::new();
    for (tool, sub) in runs {
        let out = Command::new(bin(tool))
            .args(*sub)
            .arg("--help")
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert!(out.status.success(), "{tool} {sub:?} --help: {out:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(help.contains("Usage:"), "{tool} {sub:?}: {help}");
        for w in field_report_words(&help) {
            found.push(format!("{tool} {} --help: …{w}…", sub.join(" ")));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Every string literal compiled into the tools (messages, advice, reasons,
/// clap's `about` and `help`), and every text file they embed
/// (`include_str!`): the crates' sources outside their tests.
#[test]
fn no_string_compiled_into_a_tool_names_the_field_reports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "common/src",
        "diagnose/src",
        "supervise/src",
        "sweep/src",
        "tools",
    ] {
        rust_sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "{} files", files.len());
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // Tests sit at the end of a file, after `#[cfg(test)]`.
        let code = text.split("\n#[cfg(test)]").next().unwrap();
        let shown = file.strip_prefix(root).unwrap().display();
        for (line, literal) in string_literals(code) {
            for w in field_report_words(&literal) {
                found.push(format!("{shown}:{line}: …{w}…"));
            }
            if code.contains(&format!("include_str!({literal:?})")) {
                let embedded = file.parent().unwrap().join(&literal);
                let text = std::fs::read_to_string(&embedded).unwrap();
                for w in field_report_words(&text) {
                    found.push(format!("{} (embedded): …{w}…", embedded.display()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The *.rs files under `dir` that are not tests: tests/ and benches/
/// folders, tests.rs and *_tests.rs files are left out.
fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["tests", "benches", "target", "testdata", "examples"].contains(&name.as_str()) {
                rust_sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// The string literals of Rust source `code` ("...", r"...", r#"..."#),
/// each with its first line, skipping comments and char literals. Escapes
/// are kept as written: the words looked for hold none.
fn string_literals(code: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(at(i) == '\n');
                    i += 1;
                }
                if i >= chars.len() {
                    break;
                }
            }
        } else if c == '\'' {
            // A char literal ('x', '\n', '"'), or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c == 'r'
            && (at(i + 1) == '"' || (at(i + 1) == '#' && at(i + 2) != '['))
            && !ident(at(i.wrapping_sub(1)))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let body_start = j + 1;
            let rest: String = chars[body_start..].iter().collect();
            let len = rest
                .find(&close)
                .map_or(rest.len(), |n| rest[..n].chars().count());
            let body: String = chars[body_start..body_start + len].iter().collect();
            out.push((line, body.clone()));
            line += body.matches('\n').count();
            i = body_start + len + close.chars().count();
        } else if c == '"' {
            let mut j = i + 1;
            let mut body = String::new();
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    body.push(chars[j]);
                    j += 1;
                }
                body.push(at(j));
                j += 1;
            }
            out.push((line, body.clone()));
            line += body.matches('\n').count();
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[test]
fn string_literals_are_read_as_rust_reads_them() {
    let code = "let a = \"one\"; // \"not this\"\n/* \"nor this\" */ let b = r#\"two \"quoted\"\"#;\nlet c = '\"'; let d = \"three\\\"s\"; fn f<'a>(x: &'a str) {}\nlet e = \"four\";";
    let got: Vec<(usize, String)> = string_literals(code);
    let want = [
        (1, "one"),
        (2, "two \"quoted\""),
        (3, "three\\\"s"),
        (4, "four"),
    ];
    let want: Vec<(usize, String)> = want.iter().map(|(l, s)| (*l, s.to_string())).collect();
    assert_eq!(got, want);
}
