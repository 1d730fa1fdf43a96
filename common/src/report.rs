//! Reading and writing the memdiag report (`memdiag/v1`, whose types are
//! `wire::memdiag`'s, re-exported here): `Report::parse` is the one reader
//! (YAML, JSON or CSV, the schema checked first), and the report is written
//! as YAML, JSON, CSV or a table. Also the pick of the GPU to check against
//! and the tiers' recommendation per GPU.

use crate::bad_input;
use crate::input::Input;
use crate::tiers::TierTable;
use serde::{Deserialize, Serialize};
use std::io::Write;

pub use crate::wire::memdiag::*;

impl Report {
    /// Sets each GPU's recommendation from `tiers` (or clears it when its
    /// memory is unknown or below every tier).
    pub fn recommend(&mut self, tiers: &TierTable) {
        for gpu in &mut self.gpus {
            gpu.recommendation = gpu.memory.and_then(|m| tiers.recommend(m.total_mib));
        }
    }

    /// Parses a report in any of the formats memdiag writes (YAML, JSON, CSV),
    /// checking the schema version first so that another version gets a clear
    /// message rather than a list of field errors.
    pub fn parse(input: &Input) -> anyhow::Result<Report> {
        let name = &input.name;
        let text = input.text.trim_start_matches('\u{feff}');
        if text.trim().is_empty() {
            return Err(bad_input!(
                "{name}: empty; expected a {SCHEMA} report (memdiag's output or a GPU profile)"
            ));
        }
        let report = if text.starts_with("schema,") {
            csv_format::parse(name, text)?
        } else {
            crate::wire::check_schema(name, text, SCHEMA)?;
            serde_yaml::from_str::<Report>(text)
                .map_err(|e| bad_input!("{name}: not a valid {SCHEMA} report: {e}"))?
        };
        report.validate(name)?;
        Ok(report)
    }

    /// Checks what serde cannot: the version and internal consistency.
    fn validate(&self, name: &str) -> anyhow::Result<()> {
        if self.schema != SCHEMA {
            return Err(bad_input!(
                "{name}: field `schema`: expected {SCHEMA}, found {:?}",
                self.schema
            ));
        }
        for (i, gpu) in self.gpus.iter().enumerate() {
            if let Some(m) = gpu.memory {
                if m.used_mib > m.total_mib || m.free_mib > m.total_mib {
                    return Err(bad_input!(
                        "{name}: field `gpus[{i}].memory`: used_mib ({}) and free_mib ({}) must not exceed total_mib ({})",
                        m.used_mib, m.free_mib, m.total_mib
                    ));
                }
            }
        }
        Ok(())
    }

    /// The GPU to check a config against: `index` when given, else the one with
    /// the most free memory.
    pub fn pick_gpu(&self, index: Option<u32>) -> Option<&Gpu> {
        match index {
            Some(i) => self.gpus.iter().find(|g| g.index == i),
            None => self
                .gpus
                .iter()
                .max_by_key(|g| g.memory.map_or(0, |m| m.free_mib)),
        }
    }

    pub fn write_yaml(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        crate::format::write_yaml(self, out)
    }

    pub fn write_json(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        crate::format::write_json(self, out)
    }

    pub fn write_csv(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        csv_format::write(self, out)
    }

    /// The human view: one table row per GPU, then processes and notes.
    pub fn write_table(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        table::write(self, out)
    }
}

/// CSV: one row per GPU, report-wide fields repeated on each row, lists and
/// maps as JSON in their cell so that nothing is lost. A report with no GPU is
/// one row with an empty `index`.
mod csv_format {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Row {
        schema: String,
        source: Source,
        time: Option<String>,
        host: Option<String>,
        driver_version: Option<String>,
        cuda_driver_version: Option<String>,
        report_notes: String,
        index: Option<u32>,
        name: Option<String>,
        uuid: Option<String>,
        memory_total_mib: Option<u64>,
        memory_used_mib: Option<u64>,
        memory_free_mib: Option<u64>,
        utilization_gpu_pct: Option<u32>,
        utilization_memory_pct: Option<u32>,
        temperature_c: Option<u32>,
        persistence_mode: Option<bool>,
        retired_pages_pending: Option<bool>,
        remapping_failed: Option<bool>,
        mig_enabled: Option<bool>,
        processes: Option<String>,
        unavailable: String,
        gpu_notes: String,
        recommendation: Option<String>,
    }

    pub(super) fn write(report: &Report, out: &mut dyn Write) -> anyhow::Result<()> {
        let mut w = csv::Writer::from_writer(out);
        let base = |gpu: Option<&Gpu>| -> anyhow::Result<Row> {
            Ok(Row {
                schema: report.schema.clone(),
                source: report.source,
                time: report.time.clone(),
                host: report.host.clone(),
                driver_version: report.driver_version.clone(),
                cuda_driver_version: report.cuda_driver_version.clone(),
                report_notes: json(&report.notes)?,
                index: gpu.map(|g| g.index),
                name: gpu.and_then(|g| g.name.clone()),
                uuid: gpu.and_then(|g| g.uuid.clone()),
                memory_total_mib: gpu.and_then(|g| g.memory).map(|m| m.total_mib),
                memory_used_mib: gpu.and_then(|g| g.memory).map(|m| m.used_mib),
                memory_free_mib: gpu.and_then(|g| g.memory).map(|m| m.free_mib),
                utilization_gpu_pct: gpu.and_then(|g| g.utilization).map(|u| u.gpu_pct),
                utilization_memory_pct: gpu.and_then(|g| g.utilization).map(|u| u.memory_pct),
                temperature_c: gpu.and_then(|g| g.temperature_c),
                persistence_mode: gpu.and_then(|g| g.persistence_mode),
                retired_pages_pending: gpu.and_then(|g| g.retired_pages_pending),
                remapping_failed: gpu.and_then(|g| g.remapping_failed),
                mig_enabled: gpu.and_then(|g| g.mig_enabled),
                processes: match gpu.and_then(|g| g.processes.as_ref()) {
                    Some(p) => Some(json(p)?),
                    None => None,
                },
                unavailable: json(&gpu.map(|g| g.unavailable.clone()).unwrap_or_default())?,
                gpu_notes: json(&gpu.map(|g| g.notes.clone()).unwrap_or_default())?,
                recommendation: match gpu.and_then(|g| g.recommendation.as_ref()) {
                    Some(r) => Some(json(r)?),
                    None => None,
                },
            })
        };
        if report.gpus.is_empty() {
            w.serialize(base(None)?)?;
        }
        for gpu in &report.gpus {
            w.serialize(base(Some(gpu))?)?;
        }
        w.flush()?;
        Ok(())
    }

    pub(super) fn parse(name: &str, text: &str) -> anyhow::Result<Report> {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let mut report: Option<Report> = None;
        for (i, row) in reader.deserialize::<Row>().enumerate() {
            // Line numbers as a user counts them: the header is line 1.
            let line = i + 2;
            let row = row.map_err(|e| bad_input!("{name}: line {line}: {e}"))?;
            let report = report.get_or_insert_with(|| Report::new(row.source));
            report.schema = row.schema.clone();
            report.time = row.time.clone();
            report.host = row.host.clone();
            report.driver_version = row.driver_version.clone();
            report.cuda_driver_version = row.cuda_driver_version.clone();
            report.notes = cell(name, line, "report_notes", &row.report_notes)?;
            let Some(index) = row.index else { continue };
            let mut gpu = Gpu::new(index);
            gpu.name = row.name;
            gpu.uuid = row.uuid;
            gpu.memory = match (
                row.memory_total_mib,
                row.memory_used_mib,
                row.memory_free_mib,
            ) {
                (Some(total_mib), Some(used_mib), Some(free_mib)) => Some(Memory {
                    total_mib,
                    used_mib,
                    free_mib,
                }),
                (None, None, None) => None,
                _ => {
                    return Err(bad_input!(
                        "{name}: line {line}: columns `memory_*_mib`: expected all three or none"
                    ))
                }
            };
            gpu.utilization = match (row.utilization_gpu_pct, row.utilization_memory_pct) {
                (Some(gpu_pct), Some(memory_pct)) => Some(Utilization {
                    gpu_pct,
                    memory_pct,
                }),
                (None, None) => None,
                _ => {
                    return Err(bad_input!(
                        "{name}: line {line}: columns `utilization_*_pct`: expected both or neither"
                    ))
                }
            };
            gpu.temperature_c = row.temperature_c;
            gpu.persistence_mode = row.persistence_mode;
            gpu.retired_pages_pending = row.retired_pages_pending;
            gpu.remapping_failed = row.remapping_failed;
            gpu.mig_enabled = row.mig_enabled;
            gpu.processes = match row.processes {
                Some(p) => Some(cell(name, line, "processes", &p)?),
                None => None,
            };
            gpu.unavailable = cell(name, line, "unavailable", &row.unavailable)?;
            gpu.notes = cell(name, line, "gpu_notes", &row.gpu_notes)?;
            gpu.recommendation = match row.recommendation {
                Some(r) => Some(cell(name, line, "recommendation", &r)?),
                None => None,
            };
            report.gpus.push(gpu);
        }
        report
            .ok_or_else(|| bad_input!("{name}: CSV header but no rows; expected at least one row"))
    }

    /// Reads a JSON cell back into its type, naming the line and column.
    fn cell<T: serde::de::DeserializeOwned>(
        name: &str,
        line: usize,
        field: &str,
        text: &str,
    ) -> anyhow::Result<T> {
        serde_json::from_str(text)
            .map_err(|e| bad_input!("{name}: line {line}: column `{field}`: expected JSON: {e}"))
    }

    /// A list or map cell, as compact JSON.
    fn json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
        Ok(serde_json::to_string(value)?)
    }
}

mod table {
    use super::*;
    use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};

    fn opt<T: ToString>(v: Option<T>) -> String {
        v.map_or_else(|| "n/a".to_string(), |v| v.to_string())
    }

    fn yes_no(v: Option<bool>) -> String {
        opt(v.map(|b| if b { "on" } else { "off" }))
    }

    pub(super) fn write(report: &Report, out: &mut dyn Write) -> anyhow::Result<()> {
        writeln!(out, "{}", headline(report))?;
        if !report.gpus.is_empty() {
            writeln!(out, "{}", gpu_table(&report.gpus))?;
        }
        for g in &report.gpus {
            write_gpu_details(g, out)?;
        }
        for note in &report.notes {
            writeln!(out, "note: {note}")?;
        }
        Ok(())
    }

    /// `N GPU(s) · driver · source · time`.
    fn headline(report: &Report) -> String {
        let driver = match (&report.driver_version, &report.cuda_driver_version) {
            (Some(d), Some(c)) => format!("driver {d}, CUDA {c}"),
            (Some(d), None) => format!("driver {d}"),
            _ => "driver n/a".to_string(),
        };
        let source = match report.source {
            Source::Nvml => "NVML",
            Source::Profile => "profile",
        };
        format!(
            "{} GPU(s) · {driver} · {source}{}",
            report.gpus.len(),
            report
                .time
                .as_deref()
                .map(|t| format!(" · {t}"))
                .unwrap_or_default()
        )
    }

    fn gpu_table(gpus: &[Gpu]) -> Table {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_header([
                "GPU",
                "Name",
                "Used MiB",
                "Free MiB",
                "Total MiB",
                "Util",
                "Temp",
                "Persist",
                "Health",
                "Procs",
                "Recommendation",
            ]);
        for g in gpus {
            t.add_row(gpu_row(g));
        }
        t
    }

    fn gpu_row(g: &Gpu) -> [String; 11] {
        let (used, free, total) = match g.memory {
            Some(m) => (
                m.used_mib.to_string(),
                m.free_mib.to_string(),
                m.total_mib.to_string(),
            ),
            None => ("n/a".into(), "n/a".into(), "n/a".into()),
        };
        let health = match (g.retired_pages_pending, g.remapping_failed) {
            (Some(true), _) | (_, Some(true)) => "ATTENTION".to_string(),
            (None, None) => "n/a".to_string(),
            _ => "ok".to_string(),
        };
        let rec = g.recommendation.as_ref().map_or_else(
            || "n/a".to_string(),
            |r| {
                format!(
                    "{} · batch {} · {} ex",
                    r.model_size, r.batch_size, r.max_train_examples
                )
            },
        );
        [
            g.index.to_string(),
            opt(g.name.clone()),
            used,
            free,
            total,
            opt(g.utilization.map(|u| format!("{}%", u.gpu_pct))),
            opt(g.temperature_c.map(|c| format!("{c}°C"))),
            yes_no(g.persistence_mode),
            health,
            opt(g.processes.as_ref().map(|p| p.len())),
            rec,
        ]
    }

    /// One GPU's processes, unreadable fields and notes, a line each.
    fn write_gpu_details(g: &Gpu, out: &mut dyn Write) -> anyhow::Result<()> {
        for p in g.processes.iter().flatten() {
            writeln!(
                out,
                "  GPU {} · pid {} · {} · {} · {}",
                g.index,
                p.pid,
                p.name.as_deref().unwrap_or("n/a"),
                p.used_mib
                    .map_or_else(|| "n/a".to_string(), |m| format!("{m} MiB")),
                serde_yaml::to_string(&p.kind)?.trim()
            )?;
        }
        for (field, why) in &g.unavailable {
            writeln!(out, "  GPU {} · {field}: {why}", g.index)?;
        }
        for note in &g.notes {
            writeln!(out, "  GPU {} · note: {note}", g.index)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_example_recommends_as_the_default_tiers_do() {
        // wire cannot look tiers up; its example writes the result out.
        use crate::wire::Versioned;
        let example = Report::example();
        let gpu = &example.gpus[0];
        let total = gpu.memory.unwrap().total_mib;
        assert_eq!(gpu.recommendation, TierTable::default().recommend(total));
    }

    /// A report exercising every field: two GPUs, one with processes and one
    /// whose process list and temperature could not be read.
    pub(crate) fn sample() -> Report {
        let mut r = Report::new(Source::Nvml);
        r.time = Some("2026-11-22T11:00:00Z".into());
        r.host = Some("box".into());
        r.driver_version = Some("550.54.15".into());
        r.cuda_driver_version = Some("12.4".into());
        r.notes.push("a report-wide note, with a comma".into());
        let mut a = Gpu::new(0);
        a.name = Some("Tesla T4".into());
        a.uuid = Some("GPU-1".into());
        a.memory = Some(Memory {
            total_mib: 15360,
            used_mib: 6000,
            free_mib: 9360,
        });
        a.utilization = Some(Utilization {
            gpu_pct: 87,
            memory_pct: 40,
        });
        a.temperature_c = Some(61);
        a.persistence_mode = Some(false);
        a.retired_pages_pending = Some(false);
        a.mig_enabled = Some(false);
        a.unavailable
            .insert("remapping_failed".into(), "not supported".into());
        a.processes = Some(vec![
            Process {
                pid: 42,
                name: Some("python; \"train\"".into()),
                used_mib: Some(5900),
                kind: ProcessKind::Compute,
                gpu_instance: None,
            },
            Process {
                pid: 43,
                name: None,
                used_mib: None,
                kind: ProcessKind::Both,
                gpu_instance: Some(1),
            },
        ]);
        let mut b = Gpu::new(1);
        b.name = Some("NVIDIA A100-SXM4-40GB".into());
        b.memory = Some(Memory {
            total_mib: 40960,
            used_mib: 0,
            free_mib: 40960,
        });
        b.unavailable
            .insert("processes".into(), "Insufficient Permissions".into());
        b.unavailable
            .insert("temperature_c".into(), "not supported".into());
        b.notes.push("process list unreadable".into());
        r.gpus = vec![a, b];
        r.recommend(&TierTable::default());
        r
    }

    fn input(text: String) -> Input {
        Input {
            name: "r".into(),
            text,
        }
    }

    fn render(r: &Report, f: fn(&Report, &mut dyn Write) -> anyhow::Result<()>) -> String {
        let mut buf = Vec::new();
        f(r, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn round_trips_through_every_machine_format() {
        let mut empty = Report::new(Source::Nvml);
        empty
            .notes
            .push("NVML not available: libnvidia-ml.so.1 not found".into());
        for r in [sample(), empty] {
            for write in [Report::write_yaml, Report::write_json, Report::write_csv] {
                let text = render(&r, write);
                let back = Report::parse(&input(text.clone())).unwrap();
                assert_eq!(back, r, "round trip through:\n{text}");
            }
        }
    }

    #[test]
    fn recommendation_comes_from_total_memory() {
        let r = sample();
        assert_eq!(
            r.gpus[0].recommendation.as_ref().unwrap().model_size,
            "small"
        );
        assert_eq!(
            r.gpus[1].recommendation.as_ref().unwrap().model_size,
            "medium"
        );
    }

    #[test]
    fn unsupported_is_null_not_zero() {
        let yaml = render(&sample(), Report::write_yaml);
        assert!(yaml.contains("remapping_failed: null"), "{yaml}");
        assert!(yaml.contains("remapping_failed: not supported"), "{yaml}");
    }

    #[test]
    fn pick_gpu_prefers_most_free_memory() {
        let r = sample();
        assert_eq!(r.pick_gpu(None).unwrap().index, 1);
        assert_eq!(r.pick_gpu(Some(0)).unwrap().index, 0);
        assert!(r.pick_gpu(Some(7)).is_none());
    }

    fn error(text: &str) -> String {
        format!("{:#}", Report::parse(&input(text.to_string())).unwrap_err())
    }

    #[test]
    fn bad_reports_name_the_field_or_line() {
        assert!(error("").contains("empty"));
        assert!(error("- a\n- b\n").contains("found a list"));
        assert!(error("source: nvml\n").contains("field `schema` missing"));
        assert!(error("schema: memdiag/v2\nsource: nvml\n")
            .contains("expected memdiag/v1, found memdiag/v2"));
        let e = error("schema: memdiag/v1\nsource: nvml\ngpus:\n- index: 0\n  memory: {total_mib: ten, used_mib: 0, free_mib: 0}\n");
        assert!(
            e.contains("gpus[0].memory.total_mib") && e.contains("line 5"),
            "{e}"
        );
        let e = error("schema: memdiag/v1\nsource: nvml\ngpus:\n- index: 0\n  memory: {total_mib: 1, used_mib: 5, free_mib: 0}\n");
        assert!(
            e.contains("gpus[0].memory") && e.contains("must not exceed"),
            "{e}"
        );
        assert!(
            error("schema: memdiag/v1\nsource: nvml\nextra: 1\n").contains("unknown field `extra`")
        );
        // Truncated JSON and truncated CSV.
        let json = render(&sample(), Report::write_json);
        assert!(error(&json[..json.len() / 2]).contains("not YAML or JSON"));
        let csv = render(&sample(), Report::write_csv);
        let cut = &csv[..csv.len() - 30];
        assert!(error(cut).contains("line 3"), "{}", error(cut));
        assert!(error("schema,source\n").contains("no rows"));
    }

    #[test]
    fn table_shows_unavailable_as_na_with_reason() {
        let t = render(&sample(), Report::write_table);
        assert!(
            t.contains("Tesla T4") && t.contains("small · batch 6"),
            "{t}"
        );
        assert!(
            t.contains("GPU 1 · processes: Insufficient Permissions"),
            "{t}"
        );
        assert!(t.contains("n/a"), "{t}");
    }
}
