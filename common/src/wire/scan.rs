//! `cfgcheck --scan`'s output (scan/v2): the hazards found in a tree of
//! Python sources, each with the file and line of every half of its
//! evidence; what could not be told from the code (a mode passed as a
//! variable); and the files that were not parsed, with why.

use super::cfgcheck::Skipped;
use super::hazard::{HazardId, Severity};
use super::Versioned;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub schema: String,
    /// The paths named on the command line, as given.
    pub paths: Vec<String>,
    pub files: FileCounts,
    /// The host RAM the data-loading rule judged against, in MiB.
    pub host_ram_mib: Option<u64>,
    /// ok, warnings or errors (from the findings; cannot_tell is info).
    pub verdict: String,
    pub findings: Vec<Finding>,
    pub cannot_tell: Vec<CannotTell>,
    pub not_parsed: Vec<NotParsed>,
    pub skipped: Vec<Skipped>,
}

/// How many files were read: `scanned` = `parsed` + `not_parsed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCounts {
    pub scanned: usize,
    pub parsed: usize,
    pub not_parsed: usize,
}

/// One hazard found in the code: the config rule's id, message and fix, in
/// the words of the code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub id: HazardId,
    pub severity: Severity,
    /// What will happen at run time.
    pub message: String,
    /// What to change, and where.
    pub fix: String,
    /// Each half of the evidence (a CUDA-graph compile and a checkpointing
    /// call: two, maybe in two files), the first where the fix goes.
    pub evidence: Vec<Evidence>,
}

/// A place in a file that is part of a finding's evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The path as scanned (under one of `paths`).
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters (Unicode code points) from the line's start:
    /// where the call or argument begins (added in scan/v2).
    pub col: usize,
    /// What the code there does, in words.
    pub what: String,
    /// The source line, trimmed (at most 120 characters).
    pub code: String,
}

/// A setting the hazard depends on whose value the code does not say (a
/// variable, `**kwargs`): reported, never counted as a finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CannotTell {
    pub id: HazardId,
    /// Always info.
    pub severity: Severity,
    pub file: String,
    pub line: usize,
    /// As in [`Evidence::col`] (added in scan/v2).
    pub col: usize,
    pub code: String,
    /// What is unknown, and what it would take to be a hazard.
    pub why: String,
}

/// A file skipped: the parser marked errors in it, or it could not be read
/// or is not UTF-8. The other files are still scanned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotParsed {
    pub file: String,
    /// The first line the parser could not read, when it is one.
    pub line: Option<usize>,
    pub reason: String,
}

/// The scan's verdict from its findings: errors, warnings or ok.
pub fn verdict(findings: &[Finding]) -> &'static str {
    Severity::verdict(findings.iter().map(|f| f.severity))
}

impl Versioned for Output {
    const SCHEMA: &'static str = "scan/v2";
    fn example() -> Self {
        let id = HazardId::CudaGraphsCheckpointing;
        let findings = vec![Finding {
            id,
            severity: id.severity(),
            message: "torch.compile mode \"reduce-overhead\" records CUDA graphs ...".into(),
            fix: "set mode=\"default\" in this torch.compile call (keeps most of the compile speed-up), or remove the call".into(),
            evidence: vec![
                Evidence {
                    file: "src/train.py".into(),
                    line: 12,
                    col: 9,
                    what: "torch.compile(mode=\"reduce-overhead\"): records CUDA graphs".into(),
                    code: "model = torch.compile(model, mode=\"reduce-overhead\")".into(),
                },
                Evidence {
                    file: "src/model.py".into(),
                    line: 30,
                    col: 17,
                    what: "activation checkpointing: torch.utils.checkpoint.checkpoint".into(),
                    code: "x = ckpt(block, x, use_reentrant=False)".into(),
                },
            ],
        }];
        Output {
            schema: Self::SCHEMA.into(),
            paths: vec!["src".into()],
            files: FileCounts {
                scanned: 3,
                parsed: 2,
                not_parsed: 1,
            },
            host_ram_mib: Some(12_800),
            verdict: verdict(&findings).into(),
            findings,
            cannot_tell: vec![CannotTell {
                id,
                severity: Severity::Info,
                file: "src/eval.py".into(),
                line: 8,
                col: 9,
                code: "model = torch.compile(model, mode=args.mode)".into(),
                why: "the compile mode is args.mode, not a string in the code: cannot tell whether it records CUDA graphs (reduce-overhead and max-autotune do), and the project checkpoints activations (src/model.py:30:17)".into(),
            }],
            not_parsed: vec![NotParsed {
                file: "src/old.py".into(),
                line: Some(3),
                reason: "syntax error (the parser marked errors from this line)".into(),
            }],
            skipped: vec![Skipped {
                rules: vec![HazardId::WorkersSmallHost],
                reason: "host RAM unknown (give --host-ram-gib)".into(),
            }],
        }
    }
}
