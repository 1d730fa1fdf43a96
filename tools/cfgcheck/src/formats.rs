//! cfgcheck's `--format`: the four every tool writes (`common::format`),
//! and the two that a linter's findings take, which are cfgcheck's alone:
//! concise (one line a finding, `path:line:col: severity[rule-id] message`,
//! as ruff and clippy write them, for an editor to jump to) and SARIF
//! 2.1.0 (code-scanning services). memdiag and verify-fixes do not take
//! them (clap refuses the value, exit 2); which of cfgcheck's modes takes
//! which is decided here.

use common::bad_input;
use common::format::Format;
use std::io::IsTerminal;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Asked {
    Concise,
    Table,
    Yaml,
    Json,
    Csv,
    Sarif,
}

/// What one mode writes: one of every tool's formats, or a linter's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen {
    Common(Format),
    Concise,
    Sarif,
}

impl Asked {
    fn chosen(self) -> Chosen {
        match self {
            Asked::Concise => Chosen::Concise,
            Asked::Sarif => Chosen::Sarif,
            Asked::Table => Chosen::Common(Format::Table),
            Asked::Yaml => Chosen::Common(Format::Yaml),
            Asked::Json => Chosen::Common(Format::Json),
            Asked::Csv => Chosen::Common(Format::Csv),
        }
    }
}

/// `--scan`: every format. The default is concise on a terminal, as a
/// linter's; in a pipe it stays YAML, as every tool's, so what reads the
/// scan without naming a format is not broken by a line format.
pub fn for_scan(asked: Option<Asked>) -> Chosen {
    for_scan_on(asked, std::io::stdout().is_terminal())
}

fn for_scan_on(asked: Option<Asked>, terminal: bool) -> Chosen {
    match asked {
        Some(a) => a.chosen(),
        None if terminal => Chosen::Concise,
        None => Chosen::Common(Format::Yaml),
    }
}

/// Configs: concise (each finding at its key's line and column) and every
/// tool's four, table on a terminal by default (the estimate is a table).
/// SARIF is for code: a usage error (exit 2).
pub fn for_configs(asked: Option<Asked>) -> anyhow::Result<Chosen> {
    match asked {
        Some(Asked::Sarif) => Err(bad_input!(
            "--format sarif is for --scan (findings in code); a config's findings are written as concise, table, yaml, json or csv"
        )),
        Some(a) => Ok(a.chosen()),
        None => Ok(Chosen::Common(Format::resolve(None))),
    }
}

/// A mode that writes one of every tool's formats only (--explain, --fix's
/// report): the others are a usage error (exit 2).
pub fn common_only(asked: Option<Asked>, mode: &str) -> anyhow::Result<Format> {
    match asked.map(Asked::chosen) {
        None => Ok(Format::resolve(None)),
        Some(Chosen::Common(f)) => Ok(f),
        Some(_) => {
            let (name, takes) = match asked {
                Some(Asked::Sarif) => ("sarif", "--scan"),
                _ => ("concise", "--scan and configs' findings"),
            };
            Err(bad_input!(
                "--format {name} is for {takes}; {mode} writes table, yaml, json or csv"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_is_concise_on_a_terminal_and_yaml_in_a_pipe() {
        assert_eq!(for_scan_on(None, true), Chosen::Concise);
        assert_eq!(for_scan_on(None, false), Chosen::Common(Format::Yaml));
        assert_eq!(
            for_scan_on(Some(Asked::Table), true),
            Chosen::Common(Format::Table)
        );
        assert_eq!(for_scan_on(Some(Asked::Sarif), false), Chosen::Sarif);
    }

    #[test]
    fn sarif_is_the_scans_alone() {
        let e = for_configs(Some(Asked::Sarif)).unwrap_err();
        assert_eq!(common::exit::code_of(&e), common::exit::BAD_INPUT);
        assert_eq!(for_configs(Some(Asked::Concise)).unwrap(), Chosen::Concise);
        let e = common_only(Some(Asked::Concise), "--explain").unwrap_err();
        assert!(
            e.to_string()
                .contains("--format concise is for --scan and configs' findings"),
            "{e}"
        );
        let e = common_only(Some(Asked::Sarif), "--explain").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--format sarif is for --scan; --explain writes"),
            "{e}"
        );
        assert_eq!(
            common_only(Some(Asked::Csv), "--explain").unwrap(),
            Format::Csv
        );
    }
}
