//! Every relative link in the repository's markdown, `[text](path.md#anchor)`,
//! `(path#anchor)` or `(#anchor)`, leads somewhere: the file exists, and an
//! anchor into a markdown file names one of its headings as GitHub makes
//! the anchor (lowercase; characters other than letters, digits, spaces,
//! hyphens and underscores dropped; spaces to hyphens; a repeated anchor
//! gets `-1`, `-2`, ...). Moving or renaming a section fails here until the
//! links follow it. Web links (`http:`, `https:`, `mailto:`) and links in
//! code blocks or inline code are not checked.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The markdown files of the repository, leaving out build outputs, virtual
/// environments, fuzz corpora and hidden directories.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            let skipped = name.starts_with('.')
                || matches!(name, "target" | "node_modules" | "venv" | "__pycache__")
                || (name == "corpus" && dir.ends_with("fuzz"))
                || path.join("pyvenv.cfg").exists();
            if !skipped {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The text of a markdown line outside code: inline code spans (any run of
/// backticks up to the same run) are blanked, so a link shown as code is
/// not taken for a link.
fn without_inline_code(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        let fence = "`".repeat(ticks);
        match after.find(&fence) {
            Some(end) => {
                out.push_str(&" ".repeat(ticks * 2 + end));
                rest = &after[end + ticks..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The lines of a markdown file that are not inside a fenced code block,
/// with their 1-based numbers.
fn prose_lines(markdown: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<String> = None;
    let mut out = Vec::new();
    for (i, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let opens =
            marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap());
        match &fence {
            Some(open) => {
                if opens
                    && marker.starts_with(open.as_str())
                    && trimmed[marker.len()..].trim().is_empty()
                {
                    fence = None;
                }
            }
            None if opens => fence = Some(marker),
            None => out.push((i + 1, line)),
        }
    }
    out
}

/// A heading's text as GitHub renders it before making its anchor: inline
/// code keeps its text, a link keeps its text, emphasis marks go.
fn rendered(heading: &str) -> String {
    let mut text = heading.replace('`', "");
    // `[text](url)` -> `text`
    while let Some(open) = text.find('[') {
        let Some(mid) = text[open..].find("](").map(|m| open + m) else {
            break;
        };
        let Some(close) = text[mid..].find(')').map(|c| mid + c) else {
            break;
        };
        text = format!(
            "{}{}{}",
            &text[..open],
            &text[open + 1..mid],
            &text[close + 1..]
        );
    }
    text.replace("**", "")
}

/// GitHub's anchor for a heading's rendered text.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a markdown file has: its headings' (duplicates numbered as
/// GitHub numbers them) and explicit `<a name="...">` / `id="..."` ones.
fn anchors(markdown: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(markdown) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let text = line[hashes..].trim().trim_end_matches('#');
            let base = slug(&rendered(text));
            let n = seen.entry(base.clone()).or_insert(0);
            out.push(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for key in ["name=\"", "id=\""] {
            for (i, _) in line.match_indices(key) {
                let value = &line[i + key.len()..];
                if let Some(end) = value.find('"') {
                    out.push(value[..end].to_string());
                }
            }
        }
    }
    out
}

#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// The link targets of a markdown file's prose: inline `[text](target)`
/// and reference definitions `[label]: target`.
fn links(markdown: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (line_no, line) in prose_lines(markdown) {
        let text = without_inline_code(line);
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let target = if let Some(angled) = rest.strip_prefix('<') {
                angled.split('>').next().unwrap_or("")
            } else {
                // The target ends at the first space (a title follows) or at
                // the `)` that balances the opening one.
                let mut depth = 0usize;
                let end = rest
                    .char_indices()
                    .find(|&(_, c)| match c {
                        '(' => {
                            depth += 1;
                            false
                        }
                        ')' if depth == 0 => true,
                        ')' => {
                            depth -= 1;
                            false
                        }
                        ' ' => true,
                        _ => false,
                    })
                    .map_or(rest.len(), |(j, _)| j);
                &rest[..end]
            };
            out.push(Link {
                line: line_no,
                target: target.to_string(),
            });
        }
        let trimmed = text.trim_start();
        if let Some(after) = trimmed.strip_prefix('[') {
            if let Some(close) = after.find("]:") {
                if let Some(target) = after[close + 2..].split_whitespace().next() {
                    out.push(Link {
                        line: line_no,
                        target: target.to_string(),
                    });
                }
            }
        }
    }
    out
}

fn is_web(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    ["http:", "https:", "mailto:", "ftp:"]
        .iter()
        .any(|s| lower.starts_with(s))
        || lower.contains("://")
}

/// `%20` and friends, as a browser decodes a link's path.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a/b/../c` -> `a/c`, without touching the filesystem.
fn normalised(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with one link of `file`, or None when it leads somewhere.
fn broken(file: &Path, target: &str, cache: &mut HashMap<PathBuf, Vec<String>>) -> Option<String> {
    if target.is_empty() || is_web(target) {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let path = percent_decoded(path.split('?').next().unwrap_or(""));
    let dest = if path.is_empty() {
        file.to_path_buf()
    } else if let Some(from_root) = path.strip_prefix('/') {
        root().join(from_root)
    } else {
        normalised(&file.parent().expect("a file's directory").join(&path))
    };
    if !dest.exists() {
        return Some(format!(
            "{} does not exist",
            dest.strip_prefix(root()).unwrap_or(&dest).display()
        ));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if dest.extension().and_then(|e| e.to_str()) != Some("md") {
        return None; // an anchor into a source file is a line (`#L10`), not checked
    }
    let known = cache
        .entry(dest.clone())
        .or_insert_with(|| anchors(&std::fs::read_to_string(&dest).unwrap_or_default()));
    let anchor = percent_decoded(anchor);
    (!known.contains(&anchor.to_lowercase())).then(|| {
        format!(
            "{} has no heading whose anchor is #{anchor}",
            dest.strip_prefix(root()).unwrap_or(&dest).display()
        )
    })
}

#[test]
fn every_relative_link_leads_somewhere() {
    let mut files = Vec::new();
    markdown_files(root(), &mut files);
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("docs/GUIDE.md")),
        "the walk found no docs/GUIDE.md: is it broken?"
    );
    let mut cache = HashMap::new();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a readable markdown file");
        let shown = file
            .strip_prefix(root())
            .unwrap_or(file)
            .display()
            .to_string();
        for link in links(&text) {
            checked += 1;
            if let Some(why) = broken(file, &link.target, &mut cache) {
                wrong.push(format!("{shown}:{}: ({}): {why}", link.line, link.target));
            }
        }
    }
    assert!(
        checked >= 50,
        "only {checked} link(s) found: is the scanner broken?"
    );
    assert!(
        wrong.is_empty(),
        "{} broken link(s):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    let md = concat!(
        "# trainguard guide\n",
        "## `--scan PATH...`: the same hazards in Python code\n",
        "### The search space: W&B's sweep YAML\n",
        "```\n# not a heading\n```\n",
        "## Sweeps: `train sweep`\n",
        "## Notes\n## Notes\n## Notes\n",
        "## `tiers/v1`\n",
        "## verify-fixes -- CMD\n",
        "<a name=\"config\"></a>\n",
        "## See [FORMATS](FORMATS.md) for **more**\n",
    );
    assert_eq!(
        anchors(md),
        [
            "trainguard-guide",
            "--scan-path-the-same-hazards-in-python-code",
            "the-search-space-wbs-sweep-yaml",
            "sweeps-train-sweep",
            "notes",
            "notes-1",
            "notes-2",
            "tiersv1",
            "verify-fixes----cmd",
            "config",
            "see-formats-for-more",
        ]
    );
}

#[test]
fn links_outside_code_are_read_and_broken_ones_are_found() {
    let md = concat!(
        "See [the guide](guide/sweeps.md#the-journal) and [here](#notes), ",
        "[web](https://example.com/x.md), `[code](nowhere.md)`.\n",
        "```\n[fenced](nowhere.md)\n```\n",
        "~~~sh\n[tilde](nowhere.md)\n~~~\n",
        "[ref]: ../README.md#quick-start\n",
        "[nested](a_(b).md) and [titled](c.md \"title\")\n",
    );
    let found = links(md);
    let got: Vec<(usize, &str)> = found.iter().map(|l| (l.line, l.target.as_str())).collect();
    assert_eq!(
        got,
        [
            (1, "guide/sweeps.md#the-journal"),
            (1, "#notes"),
            (1, "https://example.com/x.md"),
            (8, "../README.md#quick-start"),
            (9, "a_(b).md"),
            (9, "c.md"),
        ]
    );
    // A real file of the repository, with an anchor it has and one it lacks.
    let readme = root().join("README.md");
    let mut cache = HashMap::new();
    assert_eq!(broken(&readme, "#quick-start", &mut cache), None);
    assert_eq!(
        broken(&readme, "docs/FORMATS.md#exit-codes", &mut cache),
        None
    );
    assert!(broken(&readme, "#no-such-heading", &mut cache).is_some_and(
        |why| why.contains("README.md has no heading whose anchor is #no-such-heading")
    ));
    assert!(broken(&readme, "docs/NO_SUCH.md", &mut cache)
        .is_some_and(|why| why.contains("docs/NO_SUCH.md does not exist")));
    assert_eq!(broken(&readme, "https://example.com/#x", &mut cache), None);
}
