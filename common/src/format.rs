//! Output formats. Humans get a table on a terminal; pipes get YAML, which every
//! tool reads back (`memdiag | cfgcheck cfg.yaml` needs no flag).

use serde::Serialize;
use std::io::{IsTerminal, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Yaml,
    Json,
    Csv,
}

impl Format {
    /// The format asked for, or the default for where stdout goes.
    pub fn resolve(asked: Option<Format>) -> Format {
        asked.unwrap_or_else(|| {
            if std::io::stdout().is_terminal() {
                Format::Table
            } else {
                Format::Yaml
            }
        })
    }
}

/// Writes `value` as YAML (serde_yaml's layout, ending in a newline).
pub fn write_yaml<T: Serialize + ?Sized>(value: &T, out: &mut dyn Write) -> anyhow::Result<()> {
    out.write_all(serde_yaml::to_string(value)?.as_bytes())?;
    Ok(())
}

/// Writes `value` as pretty JSON and a newline.
pub fn write_json<T: Serialize + ?Sized>(value: &T, out: &mut dyn Write) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// A tool's writer for one of the formats that are its own (table, CSV).
pub type Writer<T> = fn(&T, &mut dyn Write) -> anyhow::Result<()>;

impl Format {
    /// Writes `value` in this format: YAML and JSON through serde, the
    /// table and CSV through the tool's own writers. Every tool's
    /// `--format` goes through here.
    pub fn write<T: Serialize>(
        self,
        value: &T,
        out: &mut dyn Write,
        table: Writer<T>,
        csv: Writer<T>,
    ) -> anyhow::Result<()> {
        match self {
            Format::Table => table(value, out),
            Format::Yaml => write_yaml(value, out),
            Format::Json => write_json(value, out),
            Format::Csv => csv(value, out),
        }
    }
}
