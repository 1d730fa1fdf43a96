//! cfgcheck's results as CSV and as the human table; the `cfgcheck/v2`
//! format itself is `common::wire::cfgcheck`.

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use common::wire::cfgcheck::{ConfigResult, EstimateOut, Output};
use common::wire::hazard::Severity;
use std::io::Write;

pub fn write_csv(out: &Output, w: &mut dyn Write) -> anyhow::Result<()> {
    let mut csv = csv::Writer::from_writer(w);
    csv.write_record([
        "config", "target", "verdict", "peak_mib", "id", "severity", "key", "line", "message",
        "fix", "format",
    ])?;
    for r in &out.results {
        let target = r
            .target
            .as_ref()
            .map(|t| {
                format!(
                    "{} (GPU {})",
                    t.name.as_deref().unwrap_or("unnamed"),
                    t.index
                )
            })
            .unwrap_or_default();
        let peak = r
            .estimate
            .as_ref()
            .map_or(String::new(), |e| e.peak_mib.to_string());
        let format = r.format.as_str();
        if r.findings.is_empty() {
            csv.write_record([
                &r.config, &target, &r.verdict, &peak, "", "", "", "", "", "", format,
            ])?;
        }
        for f in &r.findings {
            csv.write_record([
                r.config.as_str(),
                &target,
                &r.verdict,
                &peak,
                f.id.as_str(),
                f.severity.as_str(),
                f.key.as_deref().unwrap_or(""),
                &f.line.map(|l| l.to_string()).unwrap_or_default(),
                &f.message,
                &f.fix,
                format,
            ])?;
        }
    }
    csv.flush()?;
    Ok(())
}

pub fn write_table(out: &Output, w: &mut dyn Write) -> anyhow::Result<()> {
    for (i, r) in out.results.iter().enumerate() {
        if i > 0 {
            writeln!(w)?;
        }
        write_result(r, w)?;
    }
    Ok(())
}

/// One config: what it was checked against, its findings, what was read
/// or estimated, its verdict.
fn write_result(r: &ConfigResult, w: &mut dyn Write) -> anyhow::Result<()> {
    let target = match &r.target {
        Some(t) => format!(
            "{} (GPU {}, {} MiB free of {})",
            t.name.as_deref().unwrap_or("unnamed GPU"),
            t.index,
            t.free_mib.map_or("?".into(), |m| m.to_string()),
            t.total_mib.map_or("?".into(), |m| m.to_string())
        ),
        None => "no target GPU".to_string(),
    };
    match &r.estimate {
        Some(e) => writeln!(
            w,
            "{} · {target} · {} parameters · estimated peak {} MiB",
            r.config, e.parameters, e.peak_mib
        )?,
        None => writeln!(
            w,
            "{} · {} ({}) · {target}",
            r.config,
            r.format.title(),
            r.format.as_str()
        )?,
    }
    write_findings(r, w)?;
    for s in &r.skipped {
        writeln!(w, "{s}")?;
    }
    match &r.estimate {
        Some(e) => write_estimate(e, w)?,
        None => write_read_keys(r, w)?,
    }
    let tally = Severity::tally(r.findings.iter().map(|f| f.severity));
    writeln!(w, "verdict: {} ({tally})", r.verdict,)?;
    Ok(())
}

fn write_findings(r: &ConfigResult, w: &mut dyn Write) -> anyhow::Result<()> {
    if r.findings.is_empty() {
        writeln!(w, "no findings")?;
        return Ok(());
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(120)
        .set_header(["Severity", "Rule", "Line", "What will happen", "Fix"]);
    for f in &r.findings {
        t.add_row([
            f.severity.as_str().to_string(),
            f.id.to_string(),
            f.line.map_or(String::new(), |l| l.to_string()),
            f.message.clone(),
            f.fix.clone(),
        ]);
    }
    writeln!(w, "{t}")?;
    Ok(())
}

/// A config cfgcheck did not define: the keys a rule read, and as what.
fn write_read_keys(r: &ConfigResult, w: &mut dyn Write) -> anyhow::Result<()> {
    let read: Vec<String> = r
        .read_keys
        .iter()
        .map(|k| {
            format!(
                "{} (line {}) = {} as {}",
                k.key, k.line, k.value, k.reads_as
            )
        })
        .collect();
    match read.is_empty() {
        true => writeln!(w, "read no key any rule reads")?,
        false => writeln!(w, "read: {}", read.join("; "))?,
    }
    Ok(())
}

/// The memory estimate's table (trainguard's schema).
fn write_estimate(e: &EstimateOut, w: &mut dyn Write) -> anyhow::Result<()> {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(120)
        .set_header(["Memory budget (per trial)", "MiB", "Formula"]);
    for l in &e.lines {
        t.add_row([
            l.component.clone(),
            format!("{:.1}", l.mib),
            l.formula.clone(),
        ]);
    }
    t.add_row([
        "Total (estimated peak)".to_string(),
        e.peak_mib.to_string(),
        String::new(),
    ]);
    writeln!(w, "{t}")?;
    Ok(())
}
