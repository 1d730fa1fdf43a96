//! `cfgcheck --scan`: the hazards of a training config, found in Python
//! code instead. A file is parsed with tree-sitter's Python grammar (a real
//! parser: a call split over lines, an import alias, a string in a comment
//! are what they are) into [`Fact`]s; [`judge`] pairs the facts of the whole
//! tree into findings with the config rules' ids, messages and fixes
//! (`hazards`), so a mode in one file and checkpointing in another are one
//! hazard with two places.
//!
//! - `syntax`: what the tree says (imports, callees, arguments, literals);
//! - `python`: one file's text -> facts, or "not parsed" (pure);
//! - `traversals`: the same checkpointed blocks run twice in a function;
//! - `judge` (here): the facts of every file -> scan/v2's findings (pure);
//! - `walk`: the paths named -> files read and scanned (the I/O).
//!
//! The rules, each with a seed or a PyTorch issue behind it:
//! cuda-graphs-checkpointing (seed 001, pytorch#154306), workers-small-host
//! (seed 002), launch-blocking (seed 004), compiled-checkpoint-twice
//! (pytorch#193193).

mod python;
mod syntax;
mod traversals;
pub mod walk;

pub use python::{checkpoints_activations, parser, scan};

use crate::hazards::{
    checkpoint_twice_fix, checkpoint_twice_message, cuda_graphs_message, launch_blocking_fix,
    launch_blocking_message, workers_fix, workers_message, workers_too_many,
};
use common::wire::cfgcheck::Skipped;
use common::wire::hazard::{HazardId, Severity};
use common::wire::scan::{verdict, CannotTell, Evidence, FileCounts, Finding, NotParsed, Output};
use common::wire::Versioned;

/// A place in a file, with its line's source text for the reader.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub col: usize,
    pub code: String,
}

/// What one place in a file does that a hazard depends on.
#[derive(Clone, Debug, PartialEq)]
pub enum Fact {
    /// A compile setting that records CUDA graphs (`setting` in words, as
    /// the hazard's message starts), and the fix in the words of this call.
    CudaGraphs {
        at: Site,
        setting: String,
        fix: String,
    },
    /// A compile setting the code does not say (a variable, `**kwargs`).
    CompileUnknown { at: Site, why: String },
    /// Activation checkpointing (`what`: the call).
    Checkpointing { at: Site, what: String },
    /// A checkpointing switch the code does not say.
    CheckpointingUnknown { at: Site, why: String },
    /// DataLoader workers, and the setting that turns them off here.
    Workers {
        at: Site,
        workers: u64,
        setting: String,
    },
    /// A worker count the code does not say.
    WorkersUnknown { at: Site, why: String },
    /// CUDA_LAUNCH_BLOCKING set to 1 on every run (not under an `if`).
    LaunchBlocking { at: Site, how: String },
    /// A torch.compile of any mode (`what`: the callee as written).
    Compiled { at: Site, what: String },
    /// The same checkpointed blocks run twice in one function
    /// (`traversals`): `at` the second run, `how` in words.
    CheckpointedTwice {
        at: Site,
        blocks: String,
        how: String,
    },
}

/// One file's scan.
#[derive(Clone, Debug, PartialEq)]
pub enum FileScan {
    Parsed(Vec<Fact>),
    NotParsed { line: Option<usize>, reason: String },
}

/// A file and its scan, as `walk` gives them to [`judge`].
#[derive(Clone, Debug, PartialEq)]
pub struct Scanned {
    pub file: String,
    pub scan: FileScan,
}

/// The findings of a whole tree: the hazards whose halves are in it (in
/// any of its files), what cannot be told, the files not parsed.
/// `host_ram_mib` is the host the DataLoader rule judges for (None: that
/// rule is skipped, and said so).
pub fn judge(paths: Vec<String>, files: &[Scanned], host_ram_mib: Option<u64>) -> Output {
    let mut facts = vec![];
    let mut not_parsed = vec![];
    for s in files {
        match &s.scan {
            FileScan::Parsed(f) => facts.extend(f.iter().map(|f| (s.file.as_str(), f))),
            FileScan::NotParsed { line, reason } => not_parsed.push(NotParsed {
                file: s.file.clone(),
                line: *line,
                reason: reason.clone(),
            }),
        }
    }
    let mut findings = vec![];
    let mut cannot_tell = vec![];
    let mut skipped = vec![];
    cuda_graphs(&facts, &mut findings, &mut cannot_tell);
    checkpointed_twice(&facts, &mut findings);
    workers(
        &facts,
        host_ram_mib,
        &mut findings,
        &mut cannot_tell,
        &mut skipped,
    );
    for (file, f) in &facts {
        if let Fact::LaunchBlocking { at, how } = f {
            let id = HazardId::LaunchBlocking;
            findings.push(Finding {
                id,
                severity: id.severity(),
                message: launch_blocking_message("script, on every run"),
                fix: launch_blocking_fix("delete this line (or set it only under a debug flag)"),
                evidence: vec![evidence(file, at, format!("{how}: CUDA_LAUNCH_BLOCKING=1"))],
            });
        }
    }
    findings.sort_by(|a, b| {
        (a.severity, &a.evidence[0].file, a.evidence[0].line).cmp(&(
            b.severity,
            &b.evidence[0].file,
            b.evidence[0].line,
        ))
    });
    let counts = FileCounts {
        scanned: files.len(),
        parsed: files.len() - not_parsed.len(),
        not_parsed: not_parsed.len(),
    };
    Output {
        schema: Output::SCHEMA.into(),
        paths,
        files: counts,
        host_ram_mib,
        verdict: verdict(&findings).into(),
        findings,
        cannot_tell,
        not_parsed,
        skipped,
    }
}

fn evidence(file: &str, at: &Site, what: String) -> Evidence {
    Evidence {
        file: file.into(),
        line: at.line,
        col: at.col,
        what,
        code: at.code.clone(),
    }
}

fn cannot(id: HazardId, file: &str, at: &Site, why: String) -> CannotTell {
    CannotTell {
        id,
        severity: Severity::Info,
        file: file.into(),
        line: at.line,
        col: at.col,
        code: at.code.clone(),
        why,
    }
}

/// Seed 001: a CUDA-graph compile anywhere in the tree and checkpointing
/// anywhere in it. Each compile site is a finding, paired with the
/// checkpointing nearest to it (its own file first). An unknown half is
/// said only where the other half is certain.
fn cuda_graphs(
    facts: &[(&str, &Fact)],
    findings: &mut Vec<Finding>,
    cannot_tell: &mut Vec<CannotTell>,
) {
    let id = HazardId::CudaGraphsCheckpointing;
    let checkpoints: Vec<(&str, &Site, &str)> = facts
        .iter()
        .filter_map(|(file, f)| match f {
            Fact::Checkpointing { at, what } => Some((*file, at, what.as_str())),
            _ => None,
        })
        .collect();
    let compiles: Vec<(&str, &Site)> = facts
        .iter()
        .filter_map(|(file, f)| match f {
            Fact::CudaGraphs { at, .. } => Some((*file, at)),
            _ => None,
        })
        .collect();
    for (file, f) in facts {
        match f {
            Fact::CudaGraphs { at, setting, fix } => {
                let Some(&(cfile, cat, what)) = checkpoints
                    .iter()
                    .min_by_key(|(cf, cat, _)| (*cf != *file, cat.line.abs_diff(at.line)))
                else {
                    continue;
                };
                let more = match checkpoints.len() - 1 {
                    0 => String::new(),
                    n => format!(" (and {n} more place(s) in the tree)"),
                };
                findings.push(Finding {
                    id,
                    severity: id.severity(),
                    message: cuda_graphs_message(setting),
                    fix: fix.clone(),
                    evidence: vec![
                        evidence(file, at, format!("{setting}: records CUDA graphs")),
                        evidence(
                            cfile,
                            cat,
                            format!("activation checkpointing: {what}{more}"),
                        ),
                    ],
                });
            }
            Fact::CompileUnknown { at, why } => {
                if let Some((cfile, cat, _)) = checkpoints.first() {
                    cannot_tell.push(cannot(id, file, at, format!(
                        "{why}: cannot tell whether it records CUDA graphs (reduce-overhead and max-autotune do), and the project checkpoints activations ({cfile}:{}:{})",
                        cat.line, cat.col
                    )));
                }
            }
            Fact::CheckpointingUnknown { at, why } => {
                if let Some((gfile, gat)) = compiles.first() {
                    cannot_tell.push(cannot(id, file, at, format!(
                        "{why}: cannot tell whether it checkpoints activations, and the project compiles with CUDA graphs ({gfile}:{}:{})",
                        gat.line, gat.col
                    )));
                }
            }
            _ => {}
        }
    }
}

/// pytorch#193193: the same checkpointed blocks run twice in a function,
/// and a torch.compile in the tree (any mode), paired with the compile
/// nearest to it (its own file first).
fn checkpointed_twice(facts: &[(&str, &Fact)], findings: &mut Vec<Finding>) {
    let id = HazardId::CompiledCheckpointTwice;
    let compiles: Vec<(&str, &Site, &str)> = facts
        .iter()
        .filter_map(|(file, f)| match f {
            Fact::Compiled { at, what } => Some((*file, at, what.as_str())),
            _ => None,
        })
        .collect();
    for (file, f) in facts {
        let Fact::CheckpointedTwice { at, blocks, how } = f else {
            continue;
        };
        let Some(&(cfile, cat, what)) = compiles
            .iter()
            .min_by_key(|(cf, cat, _)| (*cf != *file, cat.line.abs_diff(at.line)))
        else {
            continue;
        };
        findings.push(Finding {
            id,
            severity: id.severity(),
            message: checkpoint_twice_message(blocks, how),
            fix: checkpoint_twice_fix(),
            evidence: vec![
                evidence(
                    file,
                    at,
                    format!("checkpointed blocks {blocks} run again: {how}"),
                ),
                evidence(cfile, cat, format!("{what}: compiles it into one graph")),
            ],
        });
    }
}

/// Seed 002: DataLoader workers on a host too small for them, by the config
/// rule's own threshold.
fn workers(
    facts: &[(&str, &Fact)],
    host_ram_mib: Option<u64>,
    findings: &mut Vec<Finding>,
    cannot_tell: &mut Vec<CannotTell>,
    skipped: &mut Vec<Skipped>,
) {
    let id = HazardId::WorkersSmallHost;
    let any = facts
        .iter()
        .any(|(_, f)| matches!(f, Fact::Workers { .. } | Fact::WorkersUnknown { .. }));
    let Some(ram) = host_ram_mib else {
        if any {
            skipped.push(Skipped {
                rules: vec![id],
                reason: "host RAM unknown (give --host-ram-gib)".into(),
            });
        }
        return;
    };
    for (file, f) in facts {
        match f {
            Fact::Workers {
                at,
                workers,
                setting,
            } if workers_too_many(*workers, ram) => findings.push(Finding {
                id,
                severity: id.severity(),
                message: workers_message(*workers, ram),
                fix: workers_fix(setting),
                evidence: vec![evidence(
                    file,
                    at,
                    format!("{workers} DataLoader worker process(es)"),
                )],
            }),
            Fact::WorkersUnknown { at, why } if workers_too_many(1, ram) => {
                cannot_tell.push(cannot(
                    id,
                    file,
                    at,
                    format!(
                        "{why}: above 0 it is too many for a host with {:.1} GiB of RAM",
                        ram as f64 / 1024.0
                    ),
                ));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
