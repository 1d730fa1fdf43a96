//! `--format concise`: one line a finding, `path:line:col: severity[rule-id]
//! message` (ruff's and clippy's shape, which editors and CI annotations
//! jump to), for the scan's findings and a config's. The fix is in the
//! table (`--format table`); the last line is the verdict, which matches no
//! `path:line:col:` pattern.

use common::wire::cfgcheck::{ConfigResult, Output as ConfigOutput};
use common::wire::hazard::Severity;
use common::wire::scan::{Finding, Output as ScanOutput};
use std::io::Write;

/// The scan: a finding at its first place (where the fix goes), its other
/// halves named on the same line; then what cannot be told (info), the
/// files not parsed, the rules skipped and the verdict.
pub fn write_scan(out: &ScanOutput, w: &mut dyn Write) -> anyhow::Result<()> {
    for f in &out.findings {
        writeln!(w, "{}", scan_line(f))?;
    }
    for c in &out.cannot_tell {
        writeln!(
            w,
            "{}:{}:{}: {}[{}] cannot tell: {}",
            c.file,
            c.line,
            c.col,
            c.severity.as_str(),
            c.id,
            c.why
        )?;
    }
    for n in &out.not_parsed {
        let at = n.line.map(|l| format!(":{l}")).unwrap_or_default();
        writeln!(w, "{}{at}: not parsed: {}", n.file, n.reason)?;
    }
    for s in &out.skipped {
        writeln!(w, "{s}")?;
    }
    let tally = Severity::tally(out.findings.iter().map(|f| f.severity));
    writeln!(
        w,
        "verdict: {} ({tally}; {} cannot tell; {} file(s) scanned)",
        out.verdict,
        out.cannot_tell.len(),
        out.files.scanned
    )?;
    Ok(())
}

fn scan_line(f: &Finding) -> String {
    let first = &f.evidence[0];
    let mut line = format!(
        "{}:{}:{}: {}[{}] {}",
        first.file,
        first.line,
        first.col,
        f.severity.as_str(),
        f.id,
        f.message
    );
    for e in &f.evidence[1..] {
        line += &format!(" (with {}:{}:{}: {})", e.file, e.line, e.col, e.what);
    }
    line
}

/// Configs: a finding at its key (`path:line:col`), or at the file when it
/// is about no one key; then each file's verdict. The rules skipped and
/// the estimate are the table's.
pub fn write_configs(out: &ConfigOutput, w: &mut dyn Write) -> anyhow::Result<()> {
    for r in &out.results {
        write_config(r, w)?;
    }
    Ok(())
}

fn write_config(r: &ConfigResult, w: &mut dyn Write) -> anyhow::Result<()> {
    for f in &r.findings {
        let at = match (f.line, f.col) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            (Some(l), None) => format!(":{l}"),
            _ => String::new(),
        };
        writeln!(
            w,
            "{}{at}: {}[{}] {}",
            r.config,
            f.severity.as_str(),
            f.id,
            f.message
        )?;
    }
    let tally = Severity::tally(r.findings.iter().map(|f| f.severity));
    writeln!(w, "verdict for {}: {} ({tally})", r.config, r.verdict,)?;
    Ok(())
}
