//! `cfgcheck --scan --format sarif`: the scan as SARIF 2.1.0, the log
//! code-scanning services read (GitHub's upload-sarif, GitLab, IDE
//! viewers). Valid against the OASIS schema (tests/fixtures/sarif, checked
//! by tests/sarif.rs). Each file is a URI relative to `%SRCROOT%` (the
//! directory cfgcheck ran in, given in `originalUriBaseIds`), as those
//! services expect; run it at the repository's root. Pure but for the
//! writing: the directory is the caller's.

use common::wire::hazard::{HazardId, Severity};
use common::wire::scan::{Evidence, Output};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Component, Path};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
const SRCROOT: &str = "%SRCROOT%";

/// Writes `out` as one SARIF run; `cwd` is where relative paths start.
pub fn write(out: &Output, cwd: &Path, w: &mut dyn Write) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *w, &log(out, cwd))?;
    w.write_all(b"\n")?;
    Ok(())
}

/// The SARIF log: the rules the results use (ids, summaries, fixes), a
/// result per finding (its other halves as related locations) and per
/// "cannot tell" (kind `review`), and the files not parsed and the rules
/// skipped as the invocation's notifications.
pub fn log(out: &Output, cwd: &Path) -> Value {
    let mut ids: Vec<HazardId> = out.findings.iter().map(|f| f.id).collect();
    ids.extend(out.cannot_tell.iter().map(|c| c.id));
    ids.sort_by_key(|id| id.as_str());
    ids.dedup();
    let index = |id: HazardId| ids.iter().position(|i| *i == id).unwrap_or(0);
    let mut results: Vec<Value> = out
        .findings
        .iter()
        .map(|f| {
            let related: Vec<Value> = f.evidence[1..]
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    let mut l = location(&e.file, e.line, e.col, &e.code, cwd);
                    l["id"] = json!(i + 1);
                    l["message"] = json!({ "text": e.what });
                    l
                })
                .collect();
            let first: &Evidence = &f.evidence[0];
            json!({
                "ruleId": f.id.as_str(),
                "ruleIndex": index(f.id),
                "kind": "fail",
                "level": level(f.severity),
                "message": { "text": format!("{}. Fix: {}", f.message, f.fix) },
                "locations": [location(&first.file, first.line, first.col, &first.code, cwd)],
                "relatedLocations": related,
            })
        })
        .collect();
    results.extend(out.cannot_tell.iter().map(|c| {
        json!({
            "ruleId": c.id.as_str(),
            "ruleIndex": index(c.id),
            // SARIF: a result that is not a failure has level none.
            "kind": "review",
            "level": "none",
            "message": { "text": format!("cannot tell: {}", c.why) },
            "locations": [location(&c.file, c.line, c.col, &c.code, cwd)],
        })
    }));
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "cfgcheck",
                "version": env!("CARGO_PKG_VERSION"),
                "semanticVersion": env!("CARGO_PKG_VERSION"),
                "rules": ids.iter().map(|id| rule(*id)).collect::<Vec<_>>(),
            }},
            "originalUriBaseIds": { SRCROOT: { "uri": dir_uri(cwd) } },
            "columnKind": "unicodeCodePoints",
            "invocations": [invocation(out, cwd)],
            "results": results,
        }],
    })
}

fn rule(id: HazardId) -> Value {
    json!({
        "id": id.as_str(),
        "shortDescription": { "text": id.summary() },
        "help": { "text": id.help() },
        "defaultConfiguration": { "level": level(id.severity()) },
    })
}

fn invocation(out: &Output, cwd: &Path) -> Value {
    let not_parsed: Vec<Value> = out
        .not_parsed
        .iter()
        .map(|n| {
            let mut place =
                json!({ "physicalLocation": { "artifactLocation": artifact(&n.file, cwd) } });
            if let Some(l) = n.line {
                place["physicalLocation"]["region"] = json!({ "startLine": l });
            }
            json!({
                "level": "warning",
                "message": { "text": format!("not parsed: {}", n.reason) },
                "locations": [place],
            })
        })
        .collect();
    let skipped: Vec<Value> = out
        .skipped
        .iter()
        .flat_map(|s| {
            s.rules.iter().map(move |r| {
                json!({
                    "level": "note",
                    "message": { "text": format!("skipped: {}", s.reason) },
                    "descriptor": { "id": r.as_str() },
                })
            })
        })
        .collect();
    json!({
        "executionSuccessful": true,
        "toolExecutionNotifications": not_parsed,
        "toolConfigurationNotifications": skipped,
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

fn location(file: &str, line: usize, col: usize, code: &str, cwd: &Path) -> Value {
    json!({ "physicalLocation": {
        "artifactLocation": artifact(file, cwd),
        "region": { "startLine": line, "startColumn": col, "snippet": { "text": code } },
    }})
}

/// A file as scanned, as SARIF's artifact location: a relative URI under
/// `%SRCROOT%` when it is below the directory cfgcheck ran in, else an
/// absolute `file://` URI (a path outside the tree has no relative form
/// that a code-scanning service could place).
fn artifact(file: &str, cwd: &Path) -> Value {
    let path = Path::new(file);
    let below = if path.is_absolute() {
        path.strip_prefix(cwd).ok().map(Path::to_path_buf)
    } else if path.components().any(|c| c == Component::ParentDir) {
        None
    } else {
        Some(path.to_path_buf())
    };
    match below {
        Some(rel) => {
            let parts: Vec<String> = rel
                .components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(encode(&s.to_string_lossy())),
                    _ => None,
                })
                .collect();
            json!({ "uri": parts.join("/"), "uriBaseId": SRCROOT })
        }
        None => json!({ "uri": file_uri(&cwd.join(path), false) }),
    }
}

/// `cwd` as the `file://` URI of a directory (ending in `/`, so relative
/// URIs resolve under it).
fn dir_uri(cwd: &Path) -> String {
    file_uri(cwd, true)
}

/// An absolute path as a `file://` URI, `..` resolved by name (as a
/// reader of the log would, without the file system).
fn file_uri(path: &Path, dir: bool) -> String {
    let mut parts: Vec<String> = vec![];
    for c in path.components() {
        match c {
            Component::Normal(s) => parts.push(encode(&s.to_string_lossy())),
            Component::ParentDir => {
                parts.pop();
            }
            _ => {}
        }
    }
    let tail = if dir { "/" } else { "" };
    format!("file:///{}{tail}", parts.join("/"))
}

/// Percent-encodes a path segment: everything but RFC 3986's unreserved
/// characters, byte by byte of its UTF-8.
fn encode(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_relative_to_srcroot_when_below_it() {
        let cwd = Path::new("/work/my repo");
        assert_eq!(dir_uri(cwd), "file:///work/my%20repo/");
        assert_eq!(
            artifact("./src/train.py", cwd),
            json!({ "uri": "src/train.py", "uriBaseId": SRCROOT })
        );
        assert_eq!(
            artifact("/work/my repo/a b/ü.py", cwd),
            json!({ "uri": "a%20b/%C3%BC.py", "uriBaseId": SRCROOT })
        );
        assert_eq!(
            artifact("../other/x.py", cwd),
            json!({ "uri": "file:///work/other/x.py" })
        );
        assert_eq!(
            artifact("/elsewhere/x.py", cwd),
            json!({ "uri": "file:///elsewhere/x.py" })
        );
    }
}
