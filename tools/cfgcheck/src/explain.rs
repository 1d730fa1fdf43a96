//! `cfgcheck --explain LOG`: from the error a user pasted to the cause and
//! the config change. The scanning and the table of known failures live in
//! `diagnose` (`explain`, `failures`); this module turns findings into config
//! edits (with `--config`) and prints them.

use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};
use common::config::LoadedConfig;
use common::exit;
use common::format::Format;
use common::report::Gpu;
use common::wire::explain::{Found, Output};
use common::wire::Versioned;
use diagnose::explain::{Explained, Scan};
use diagnose::hazards::{self, Edits, ExplainCx, NO_CONFIG_FIX};
use diagnose::yaml_edit;
use std::io::Write;

/// The config edits (key, YAML value) that fix a finding, if any: the
/// edits of the hazard that would have caught it.
fn edits(
    f: &Explained,
    loaded: &LoadedConfig,
    gpu: Option<&Gpu>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Edits {
    let cx = ExplainCx {
        config: &loaded.config,
        gpu,
        oom: f.oom,
        env,
    };
    match f.rule {
        Some(id) => hazards::of(id).edits(&cx),
        None => Err(NO_CONFIG_FIX.into()),
    }
}

fn diff_for(
    f: &Explained,
    loaded: &LoadedConfig,
    gpu: Option<&Gpu>,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    let edits = match edits(f, loaded, gpu, env) {
        Ok(e) => e,
        Err(why) => return why,
    };
    let mut text = loaded.text.clone();
    for (key, value) in &edits {
        match yaml_edit::set(&text, key, value) {
            Ok(t) => text = t,
            Err(e) => return format!("cannot edit `{key}` in place: {e}"),
        }
    }
    similar::TextDiff::from_lines(&loaded.text, &text)
        .unified_diff()
        .header(&loaded.name, &format!("{} (fixed)", loaded.name))
        .to_string()
}

pub fn print(
    scan: &Scan,
    log: &str,
    loaded: Option<&LoadedConfig>,
    gpu: Option<&Gpu>,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let env = |name: &str| std::env::var(name).ok();
    let found: Vec<Found> = scan
        .found
        .iter()
        .map(|f| f.found(loaded.map(|l| diff_for(f, l, gpu, &env))))
        .collect();
    let output = Output {
        schema: Output::SCHEMA.into(),
        log: log.into(),
        lines: scan.lines,
        last_error: if found.is_empty() {
            scan.last_error.clone()
        } else {
            None
        },
        found,
    };
    format.write(&output, out, write_table, write_csv)?;
    out.flush()?;
    if output.found.is_empty() {
        let last = output
            .last_error
            .as_ref()
            .map_or("no error-looking line either".to_string(), |e| {
                format!("last error-looking line {}: {}", e.line, e.text)
            });
        common::say!(
            "cfgcheck: {log}: no known failure in {} lines; {last}",
            scan.lines
        );
        return Ok(exit::FOUND);
    }
    Ok(exit::OK)
}

fn write_csv(o: &Output, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "id",
        "class",
        "title",
        "lines",
        "first_evidence",
        "cause",
        "fix",
        "rule",
        "config_diff",
    ])?;
    for f in &o.found {
        let lines: Vec<String> = f.evidence.iter().map(|e| e.line.to_string()).collect();
        w.write_record([
            f.id.as_str(),
            f.class.as_str(),
            f.title.as_str(),
            &lines.join(" "),
            &f.evidence[0].text,
            &f.cause,
            &f.fix,
            f.rule.map_or("", |r| r.as_str()),
            f.config_diff.as_deref().unwrap_or(""),
        ])?;
    }
    w.flush()?;
    Ok(())
}

fn write_table(o: &Output, w: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(
        w,
        "{}: {} line(s), {} known failure(s)",
        o.log,
        o.lines,
        o.found.len()
    )?;
    for f in &o.found {
        let e = f;
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(120);
        t.set_header([format!("{} ({})", e.title, e.id), String::new()]);
        let evidence: Vec<String> = e
            .evidence
            .iter()
            .map(|v| format!("line {}: {}", v.line, v.text))
            .collect();
        let more = if e.matches > e.evidence.len() {
            format!("\n(+{} more)", e.matches - e.evidence.len())
        } else {
            String::new()
        };
        t.add_row(["Evidence".to_string(), evidence.join("\n") + &more]);
        t.add_row(["Cause".to_string(), e.cause.to_string()]);
        t.add_row(["Fix".to_string(), e.fix.to_string()]);
        if let Some(rule) = e.rule {
            t.add_row([
                "Caught before the run by".to_string(),
                format!("cfgcheck rule {rule}"),
            ]);
        }
        writeln!(w, "{t}")?;
        if let Some(d) = &f.config_diff {
            writeln!(w, "{d}")?;
        }
    }
    if let Some(e) = &o.last_error {
        writeln!(
            w,
            "nothing known; last error-looking line {}: {}",
            e.line, e.text
        )?;
    }
    Ok(())
}
