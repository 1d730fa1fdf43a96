//! `cfgcheck --scan PATH...`: the hazards in a tree of Python files
//! (`diagnose::scan`), written as scan/v2 (`common::wire::scan`) in
//! cfgcheck's formats (the table and CSV here, concise and SARIF in their
//! modules). Exit 0 with nothing at error level, 1 with an error
//! (or a warning under --strict), 2 for a path that does not exist.

use crate::formats::Chosen;
use crate::{concise, sarif};
use comfy_table::{presets::UTF8_FULL_CONDENSED, ColumnConstraint, ContentArrangement, Table};
use common::exit;
use common::wire::hazard::Severity;
use common::wire::scan::Output;
use diagnose::scan::{judge, walk};
use std::io::Write;
use std::path::PathBuf;

/// Scans `paths` and writes the result; the exit code. `host_ram_mib`:
/// what the DataLoader rule judges for (None: it is skipped, and said so).
pub fn run(
    paths: &[PathBuf],
    host_ram_mib: Option<u64>,
    format: Chosen,
    strict: bool,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let (files, mut scanned) = walk::files(paths)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    scanned.extend(walk::scan_all(&files, threads)?);
    let names = paths.iter().map(|p| p.display().to_string()).collect();
    let result = judge(names, &scanned, host_ram_mib);
    match format {
        Chosen::Common(f) => f.write(&result, out, write_table, write_csv)?,
        Chosen::Concise => concise::write_scan(&result, out)?,
        Chosen::Sarif => sarif::write(&result, &std::env::current_dir()?, out)?,
    }
    out.flush()?;
    let worst = result.findings.iter().map(|f| f.severity).min();
    Ok(
        if worst == Some(Severity::Error) || (strict && worst == Some(Severity::Warning)) {
            exit::FOUND
        } else {
            exit::OK
        },
    )
}

/// One row per finding, per "cannot tell" and per file not parsed; `file`,
/// `line` and `col` are the first place of the evidence, `evidence` every place.
pub fn write_csv(out: &Output, w: &mut dyn Write) -> anyhow::Result<()> {
    let mut csv = csv::Writer::from_writer(w);
    csv.write_record([
        "kind", "id", "severity", "file", "line", "col", "evidence", "message", "fix",
    ])?;
    for f in &out.findings {
        let first = &f.evidence[0];
        let all: Vec<String> = f
            .evidence
            .iter()
            .map(|e| format!("{}:{}:{} {}", e.file, e.line, e.col, e.what))
            .collect();
        csv.write_record([
            "finding",
            f.id.as_str(),
            f.severity.as_str(),
            &first.file,
            &first.line.to_string(),
            &first.col.to_string(),
            &all.join("; "),
            &f.message,
            &f.fix,
        ])?;
    }
    for c in &out.cannot_tell {
        csv.write_record([
            "cannot-tell",
            c.id.as_str(),
            c.severity.as_str(),
            &c.file,
            &c.line.to_string(),
            &c.col.to_string(),
            &format!("{}:{}:{} {}", c.file, c.line, c.col, c.code),
            &c.why,
            "",
        ])?;
    }
    for n in &out.not_parsed {
        let line = n.line.map(|l| l.to_string()).unwrap_or_default();
        csv.write_record(["not-parsed", "", "", &n.file, &line, "", "", &n.reason, ""])?;
    }
    csv.flush()?;
    Ok(())
}

pub fn write_table(out: &Output, w: &mut dyn Write) -> anyhow::Result<()> {
    let host = out.host_ram_mib.map_or("host RAM unknown".into(), |m| {
        format!("host RAM {:.1} GiB", m as f64 / 1024.0)
    });
    writeln!(
        w,
        "{} · {} file(s) scanned ({} parsed, {} not parsed) · {host}",
        out.paths.join(" "),
        out.files.scanned,
        out.files.parsed,
        out.files.not_parsed
    )?;
    if out.findings.is_empty() {
        writeln!(w, "no findings")?;
    } else {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(120)
            .set_header(["Severity", "Rule", "Where", "What will happen", "Fix"]);
        for f in &out.findings {
            let places: Vec<String> = f
                .evidence
                .iter()
                .map(|e| format!("{}:{}:{}\n  {}", e.file, e.line, e.col, e.code))
                .collect();
            t.add_row([
                f.severity.as_str().to_string(),
                f.id.to_string(),
                places.join("\n"),
                f.message.clone(),
                f.fix.clone(),
            ]);
        }
        // The rule's id and severity whole; the prose wraps.
        for i in [0, 1] {
            if let Some(c) = t.column_mut(i) {
                c.set_constraint(ColumnConstraint::ContentWidth);
            }
        }
        writeln!(w, "{t}")?;
    }
    for c in &out.cannot_tell {
        writeln!(
            w,
            "cannot tell ({}): {}:{}:{}: {}",
            c.id, c.file, c.line, c.col, c.why
        )?;
    }
    for n in &out.not_parsed {
        let at = n.line.map(|l| format!(":{l}")).unwrap_or_default();
        writeln!(w, "not parsed: {}{at}: {}", n.file, n.reason)?;
    }
    for s in &out.skipped {
        writeln!(w, "{s}")?;
    }
    let tally = Severity::tally(out.findings.iter().map(|f| f.severity));
    writeln!(
        w,
        "verdict: {} ({tally}; {} cannot tell)",
        out.verdict,
        out.cannot_tell.len()
    )?;
    Ok(())
}
