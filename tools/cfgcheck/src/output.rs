//! cfgcheck's results as CSV and as the human table; the `cfgcheck/v1`
//! format itself is `common::wire::cfgcheck`.

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use common::wire::cfgcheck::Output;
use common::wire::hazard::Severity;
use std::io::Write;

pub fn write_csv(out: &Output, w: &mut dyn Write) -> anyhow::Result<()> {
    let mut csv = csv::Writer::from_writer(w);
    csv.write_record([
        "config", "target", "verdict", "peak_mib", "id", "severity", "key", "line", "message",
        "fix",
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
        let peak = r.estimate.peak_mib.to_string();
        if r.findings.is_empty() {
            csv.write_record([
                &r.config, &target, &r.verdict, &peak, "", "", "", "", "", "",
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
        writeln!(
            w,
            "{} · {target} · {} parameters · estimated peak {} MiB",
            r.config, r.estimate.parameters, r.estimate.peak_mib
        )?;
        if r.findings.is_empty() {
            writeln!(w, "no findings")?;
        } else {
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
        }
        for s in &r.skipped {
            let rules: Vec<&str> = s.rules.iter().map(|r| r.as_str()).collect();
            writeln!(w, "skipped {}: {}", rules.join(", "), s.reason)?;
        }
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(120)
            .set_header(["Memory budget (per trial)", "MiB", "Formula"]);
        for l in &r.estimate.lines {
            t.add_row([
                l.component.clone(),
                format!("{:.1}", l.mib),
                l.formula.clone(),
            ]);
        }
        t.add_row([
            "Total (estimated peak)".to_string(),
            r.estimate.peak_mib.to_string(),
            String::new(),
        ]);
        writeln!(w, "{t}")?;
        let counts = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
        writeln!(
            w,
            "verdict: {} ({} error(s), {} warning(s), {} info)",
            r.verdict,
            counts(Severity::Error),
            counts(Severity::Warning),
            counts(Severity::Info)
        )?;
    }
    Ok(())
}
