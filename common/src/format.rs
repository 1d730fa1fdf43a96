//! Output formats. Humans get a table on a terminal; pipes get YAML, which every
//! tool reads back (`memdiag | cfgcheck cfg.yaml` needs no flag).

use std::io::IsTerminal;

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
