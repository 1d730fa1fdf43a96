//! Every place the code sends a reader to a section of the documentation,
//! `see docs/guide/config.md, "Config"` in a message or `(docs/FORMATS.md,
//! "Exit codes")` in a doc comment, names a file by its path from the
//! workspace root and a heading that file has; a bare `README, "…"` names a heading README.md
//! still has. Moving a section or renaming its heading fails here until the
//! citations follow it.
//!
//! A citation is `<file>.md, "<Heading>"` or `<file>.md "<Heading>"`, with
//! the quotes raw (comments) or escaped as `\"` (string literals); `README`
//! without `.md` means README.md. Headings are compared without backticks.

use std::path::{Path, PathBuf};

/// The directories whose sources are read: every crate's Rust, and the
/// scripts and packaging that cite the docs in their comments and messages.
const SCANNED: [&str; 9] = [
    "common",
    "diagnose",
    "sweep",
    "supervise",
    "tools",
    "testkit",
    "scripts",
    "packaging",
    "fuzz/props",
];

/// Single files at the root that cite the docs.
const SCANNED_FILES: [&str; 2] = [".pre-commit-hooks.yaml", "justfile"];

/// The kinds of source a citation may stand in.
const SOURCE_EXTENSIONS: [&str; 6] = [".rs", ".py", ".sh", ".toml", ".yaml", ".yml"];

#[derive(Debug, PartialEq)]
struct Citation {
    /// 1-based line of the citation in its source file.
    line: usize,
    /// The cited file, relative to the workspace root.
    doc: String,
    /// The cited heading, as written.
    heading: String,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && !path.join("pyvenv.cfg").exists() {
                source_files(&path, out);
            }
        } else if SOURCE_EXTENSIONS.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// A character of a file path (`docs/guide/sweeps.md`, `bench/README.md`).
fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')
}

/// After the cited file: `, "Heading"` or ` "Heading"` (quotes raw or
/// escaped), possibly with the heading on the next comment line. Returns the
/// heading, or None when no quote follows (`README's`, `RELIABILITY.md
/// finding 6`).
fn heading_after(rest: &str) -> Option<String> {
    let rest = rest.strip_prefix(',').unwrap_or(rest);
    let trimmed = rest.trim_start_matches([' ', '\t']);
    if trimmed.len() == rest.len() && !rest.starts_with('\n') {
        return None; // the quote must be set apart by a space
    }
    let mut rest = trimmed;
    if let Some(next) = rest.strip_prefix('\n') {
        // A citation broken across comment lines: `//! ... docs/GUIDE.md,`
        // then `//! "Config" ...`.
        let next = next.trim_start();
        let next = ["//!", "///", "//"]
            .iter()
            .find_map(|m| next.strip_prefix(m))?;
        rest = next.trim_start_matches([' ', '\t']);
    }
    let (body, close) = if let Some(b) = rest.strip_prefix("\\\"") {
        (b, "\\\"")
    } else if let Some(b) = rest.strip_prefix('"') {
        (b, "\"")
    } else {
        return None;
    };
    let end = body.find(close)?;
    let heading = &body[..end];
    (!heading.is_empty() && !heading.contains('\n')).then(|| heading.to_string())
}

/// Every citation in a source file's text.
fn citations(text: &str) -> Vec<Citation> {
    let line_of = |i: usize| text[..i].matches('\n').count() + 1;
    let mut found = Vec::new();
    // `<path>.md, "Heading"`
    for (i, _) in text.match_indices(".md") {
        let start = text[..i]
            .char_indices()
            .rev()
            .take_while(|&(_, c)| path_char(c))
            .last()
            .map_or(i, |(j, _)| j);
        let name = &text[start..i];
        if name.is_empty() || text[i + 3..].starts_with(|c: char| path_char(c)) {
            continue;
        }
        if let Some(heading) = heading_after(&text[i + 3..]) {
            found.push(Citation {
                line: line_of(i),
                doc: format!("{name}.md"),
                heading,
            });
        }
    }
    // A bare `README, "Heading"`.
    for (i, _) in text.match_indices("README") {
        let before = text[..i].chars().next_back();
        let after = &text[i + "README".len()..];
        if before.is_some_and(path_char) || after.starts_with(|c: char| path_char(c)) {
            continue;
        }
        if let Some(heading) = heading_after(after) {
            found.push(Citation {
                line: line_of(i),
                doc: "README.md".into(),
                heading,
            });
        }
    }
    found
}

/// The headings of a markdown file (any level, outside code fences),
/// without backticks.
fn headings(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let text = line[hashes..].trim().trim_end_matches('#').trim();
            out.push(text.replace('`', ""));
        }
    }
    out
}

#[test]
fn every_cited_section_exists() {
    let mut files = Vec::new();
    for dir in SCANNED {
        source_files(&root().join(dir), &mut files);
    }
    files.extend(SCANNED_FILES.iter().map(|f| root().join(f)));
    files.sort();
    assert!(!files.is_empty(), "no sources under {SCANNED:?}");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not text (a fuzz seed): it cites nothing
        };
        let shown = file.strip_prefix(root()).unwrap_or(file).display();
        for c in citations(&text) {
            checked += 1;
            let doc = root().join(&c.doc);
            let Ok(markdown) = std::fs::read_to_string(&doc) else {
                wrong.push(format!(
                    "{shown}:{}: cites {}, \"{}\": no such file at the workspace root",
                    c.line, c.doc, c.heading
                ));
                continue;
            };
            let wanted = c.heading.replace('`', "");
            if !headings(&markdown).contains(&wanted) {
                wrong.push(format!(
                    "{shown}:{}: cites {}, \"{}\": {} has no such heading",
                    c.line, c.doc, c.heading, c.doc
                ));
            }
        }
    }
    // The scanner itself must be finding the citations the code has.
    assert!(
        checked >= 5,
        "only {checked} citation(s) found: is the scanner broken?"
    );
    assert!(
        wrong.is_empty(),
        "citations of a section that is not there (cite it as `docs/FILE.md, \"Heading\"`):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn scanner_reads_raw_escaped_and_bare_citations() {
    let src = concat!(
        "//! Exit codes (documented in docs/FORMATS.md, \"Exit codes\"), and\n",
        "let m = \"see docs/GUIDE.md, \\\"Config\\\"\";\n",
        "let n = \"see docs/TROUBLESHOOTING.md \\\"When a run fails\\\"\";\n",
        "/// See README, \"Quick start\". And README's \"x\", RELIABILITY.md finding 6,\n",
        "/// \"README.md\", \"other.md\" and (bench/README.md, \"The estimate against\n",
        "//! docs/GUIDE.md,\n",
        "//! \"`memdiag/v1` report\" ...\n",
        "# a hook (docs/guide/cfgcheck-scan.md, \"pre-commit\"), see docs/guide/\n",
    );
    let found = citations(src);
    let got: Vec<(usize, &str, &str)> = found
        .iter()
        .map(|c| (c.line, c.doc.as_str(), c.heading.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (1, "docs/FORMATS.md", "Exit codes"),
            (2, "docs/GUIDE.md", "Config"),
            (3, "docs/TROUBLESHOOTING.md", "When a run fails"),
            (6, "docs/GUIDE.md", "`memdiag/v1` report"),
            (8, "docs/guide/cfgcheck-scan.md", "pre-commit"),
            (4, "README.md", "Quick start"),
        ]
    );
    let md = "# T\n\n## `memdiag/v1` report (x)\n```\n# not a heading\n```\n### Sweeps: `train sweep` ##\n";
    assert_eq!(
        headings(md),
        ["T", "memdiag/v1 report (x)", "Sweeps: train sweep"]
    );
}
