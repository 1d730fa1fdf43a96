//! `cfgcheck --explain`: a log or traceback in, every known failure in it
//! out (the table in `failures`), with the lines that show it. Read line by
//! line in one pass, so a 50 MB log costs no more than reading it.

use crate::failures::{self, Known, KNOWN};
use common::bad_input;
use common::wire::explain::{Evidence, Found};
use common::wire::failure::{Class, OomFigures};
use common::wire::hazard::HazardId;
use serde::Serialize;
use std::io::BufRead;

#[derive(Clone, Debug, Serialize)]
pub struct Explained {
    pub id: &'static str,
    pub class: Class,
    pub title: &'static str,
    pub cause: &'static str,
    pub fix: &'static str,
    /// The cfgcheck rule that would have caught it before the run.
    pub rule: Option<HazardId>,
    /// Up to `MAX_EVIDENCE` matching lines, 1-based.
    pub evidence: Vec<Evidence>,
    pub matches: usize,
    /// For out-of-memory messages: the figures PyTorch printed.
    pub oom: Option<OomFigures>,
}

impl Explained {
    /// As cfgcheck-explain/v1 writes it, with its config diff.
    pub fn found(&self, config_diff: Option<String>) -> Found {
        Found {
            id: self.id.into(),
            class: self.class,
            title: self.title.into(),
            cause: self.cause.into(),
            fix: self.fix.into(),
            rule: self.rule,
            evidence: self.evidence.clone(),
            matches: self.matches,
            oom: self.oom,
            config_diff,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Scan {
    pub lines: usize,
    pub found: Vec<Explained>,
    /// The last line that looks like an error, for when nothing is known.
    pub last_error: Option<Evidence>,
    /// The framework the log came from, when its lines say so (`Hugging
    /// Face Trainer`): the fixes are in its words.
    pub framework: Option<&'static str>,
    /// Whether the log is train's own trainer's (its start line): only
    /// then are train's config keys and `train --resume` the fix.
    pub ours: bool,
}

/// Whether a line is the start line train's trainer prints (`train:
/// CONFIG · DEVICE · N parameters (cfgcheck's estimate: N) · ...`).
pub fn trains_own(line: &str) -> bool {
    line.starts_with("train: ") && line.contains(" parameters (cfgcheck's estimate: ")
}

/// Lines only Hugging Face's Trainer (transformers) prints: its banner,
/// its log dicts, its own source files in a traceback.
const HF_MARKS: [&str; 6] = [
    "***** Running training *****",
    "{'loss': ",
    "{'eval_loss': ",
    "'train_runtime': ",
    "transformers/trainer.py",
    "TrainingArguments",
];

/// Whether a line is one only Hugging Face's Trainer prints.
pub fn hugging_face(line: &str) -> bool {
    HF_MARKS.iter().any(|m| line.contains(m))
}

impl Scan {
    /// Each fix in the words of the tools the user has and of the program
    /// the log came from: a Trainer log gets the Trainer's flags and names
    /// (`num_labels`); a log of train's own trainer (`ours`: its start line
    /// is in the log, or the user named train's config) train's config keys
    /// and `train --resume`; any other log the change to the user's own
    /// script.
    pub fn advise(&mut self, ours: bool) {
        for e in &mut self.found {
            let k = known(e.id);
            e.fix = match (self.framework, ours) {
                (Some(_), _) => k.hf_fix.unwrap_or(k.program_fix),
                (None, true) => k.fix,
                (None, false) => k.program_fix,
            };
        }
    }
}

const MAX_EVIDENCE: usize = 5;
const MAX_LINE: usize = 400;

fn known(id: &str) -> &'static Known {
    KNOWN
        .iter()
        .find(|k| k.id == id)
        .expect("an id of the table")
}

fn looks_like_error(line: &str) -> bool {
    [
        "Error",
        "error:",
        "Traceback",
        "Exception",
        "FAILED",
        "fatal",
    ]
    .iter()
    .any(|w| line.contains(w))
}

fn clip(line: &str) -> String {
    let t = line.trim_end();
    match t.char_indices().nth(MAX_LINE) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// Scans `reader`; `name` names it in messages. Binary input (NUL bytes in
/// its first 8 KiB) is refused as bad input.
pub fn scan(name: &str, mut reader: impl BufRead) -> anyhow::Result<Scan> {
    let mut found: Vec<Explained> = Vec::new();
    let mut last_error = None;
    let mut framework = None;
    let mut ours = false;
    let mut buf = Vec::new();
    let mut n = 0usize;
    let mut bytes = 0usize;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| bad_input!("{name}: cannot read: {e}"))?;
        if read == 0 {
            break;
        }
        if bytes < 8192 && buf.contains(&0) {
            return Err(bad_input!(
                "{name}: binary data (NUL bytes) near byte {bytes}; expected a text log"
            ));
        }
        bytes += read;
        n += 1;
        let line = String::from_utf8_lossy(&buf);
        if framework.is_none() && hugging_face(&line) {
            framework = Some("Hugging Face Trainer");
        }
        ours |= trains_own(&line);
        let Some(k) = failures::find(&line) else {
            if looks_like_error(&line) {
                last_error = Some(Evidence {
                    line: n,
                    text: clip(&line),
                });
            }
            continue;
        };
        let oom = (k.class == Class::OutOfMemory).then(|| failures::oom_figures(&line));
        let k = match oom {
            Some(f) if f.fragmented() => known(HazardId::AllocatorFragmentation.as_str()),
            _ => k,
        };
        let evidence = Evidence {
            line: n,
            text: clip(&line),
        };
        match found.iter_mut().find(|e| e.id == k.id) {
            Some(e) => {
                e.matches += 1;
                if e.evidence.len() < MAX_EVIDENCE {
                    e.evidence.push(evidence);
                }
            }
            None => found.push(Explained {
                id: k.id,
                class: k.class,
                title: k.title,
                cause: k.cause,
                fix: k.fix,
                rule: k.rule,
                evidence: vec![evidence],
                matches: 1,
                oom,
            }),
        }
    }
    if n == 0 {
        return Err(bad_input!("{name}: empty; expected a log or traceback"));
    }
    let mut scan = Scan {
        lines: n,
        found: one_story(found),
        last_error,
        framework,
        ours,
    };
    scan.advise(ours);
    Ok(scan)
}

/// A broken allocator means expandable segments were on: the out-of-memory
/// before it is not fragmentation that turning them on would fix, so its
/// lines are told as the out-of-memory that broke the allocator, and the
/// log says one thing about expandable segments.
fn one_story(mut found: Vec<Explained>) -> Vec<Explained> {
    let broken = found.iter().any(|e| e.class == Class::AllocatorBroken);
    let fragmented = HazardId::AllocatorFragmentation.as_str();
    if !broken || !found.iter().any(|e| e.id == fragmented) {
        return found;
    }
    let plain = known(HazardId::MemoryExceedsFree.as_str());
    let moved: Vec<Explained> = found
        .iter()
        .filter(|e| e.id == fragmented)
        .cloned()
        .collect();
    found.retain(|e| e.id != fragmented);
    for m in moved {
        match found.iter_mut().find(|e| e.id == plain.id) {
            Some(e) => {
                e.matches += m.matches;
                e.evidence.extend(m.evidence);
                e.evidence.sort_by_key(|v| v.line);
                e.evidence.truncate(MAX_EVIDENCE);
            }
            None => found.push(Explained {
                id: plain.id,
                title: plain.title,
                cause: plain.cause,
                fix: plain.fix,
                rule: plain.rule,
                ..m
            }),
        }
    }
    found.sort_by_key(|e| e.evidence.first().map_or(0, |v| v.line));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> anyhow::Result<Scan> {
        scan("log", text.as_bytes())
    }

    #[test]
    fn the_fix_fits_the_framework_and_the_tools() {
        let label = "IndexError: Target 5 is out of bounds.\n";
        // A log of train's own trainer (its start line): train's keys.
        let ours = format!("train: a.yaml · cpu · 284897 parameters (cfgcheck's estimate: 284897) · 1024 training / 256 validation examples · run directory runs/a\n{label}");
        let s = run(&ours).unwrap();
        assert!(s.ours);
        assert!(s.found[0].fix.contains("num_classes"), "{}", s.found[0].fix);
        // Any other log: the user's own script's words, not train's.
        let mut s = run(label).unwrap();
        assert_eq!((s.framework, s.ours), (None, false));
        s.advise(false);
        assert!(!s.found[0].fix.contains("train "), "{}", s.found[0].fix);
        assert!(
            s.found[0].fix.contains("assert y.min() >= 0"),
            "{}",
            s.found[0].fix
        );
        // A Trainer's log: its words.
        let hf = format!("***** Running training *****\n{{'loss': 2.1, 'epoch': 0.5}}\n{label}");
        let mut s = run(&hf).unwrap();
        assert_eq!(s.framework, Some("Hugging Face Trainer"));
        for trainer in [true, false] {
            s.advise(trainer);
            let fix = s.found[0].fix;
            assert!(
                fix.contains("num_labels") && !fix.contains("num_classes"),
                "{fix}"
            );
        }
        let oom = format!(
            "{{'eval_loss': 0.4}}\nRuntimeError: {}\n",
            crate::failures::tests::OOM
        );
        let s = run(&oom).unwrap();
        let fix = s.found[0].fix;
        assert!(
            fix.contains("--per_device_train_batch_size") && !fix.contains("--parallel"),
            "{fix}"
        );
    }

    #[test]
    fn an_out_of_memory_that_broke_the_allocator_is_one_story() {
        // The fragmented-looking out-of-memory, then the assert on each
        // allocation after it: expandable segments were on.
        let log = format!(
            "{}\nstep 3\n{}\n{}\n",
            crate::failures::tests::OOM_FRAGMENTED,
            crate::failures::tests::ALLOCATOR_BROKEN,
            crate::failures::tests::ALLOCATOR_BROKEN
        );
        let s = run(&log).unwrap();
        let ids: Vec<&str> = s.found.iter().map(|e| e.id).collect();
        assert_eq!(ids, ["memory-exceeds-free", "allocator-broken"], "{ids:?}");
        assert_eq!(s.found[0].evidence[0].line, 1);
        assert!(
            s.found
                .iter()
                .all(|e| !e.fix.contains("expandable_segments:True")),
            "{:?}",
            s.found.iter().map(|e| e.fix).collect::<Vec<_>>()
        );
        // A user's script: restart it, not `train --resume`.
        assert!(
            s.found[1].fix.starts_with("restart your script"),
            "{}",
            s.found[1].fix
        );
        // Without the assert, the same out-of-memory is fragmentation.
        let s = run(crate::failures::tests::OOM_FRAGMENTED).unwrap();
        assert_eq!(s.found[0].id, "allocator-fragmentation");
    }

    #[test]
    fn seed_001_crash_is_explained_with_its_lines() {
        // Seed 001's traceback, as the seed quotes it.
        let log =
            "Epoch 1/50 | Train Loss: 4.1156 | Val Loss: 1.3616 | LR: 0.000001 | Time: 140.54s\n\
                   Traceback (most recent call last):\n\
                   RuntimeError: static input data pointer changed.\n\
                   input name: primals_1. data pointer changed from 12919305216 to 12919242752.\n";
        let s = run(log).unwrap();
        assert_eq!(s.found.len(), 1);
        let f = &s.found[0];
        assert_eq!(f.id, "cuda-graphs-checkpointing");
        assert_eq!(
            f.rule.map(HazardId::as_str),
            Some("cuda-graphs-checkpointing")
        );
        assert_eq!(f.evidence[0].line, 3);
        assert_eq!(f.matches, 1);
        // The seed's own script, not train's trainer: its code's words.
        assert!(
            f.fix.contains("torch.compile(mode=\"default\")"),
            "{}",
            f.fix
        );
    }

    #[test]
    fn out_of_memory_is_split_by_its_figures() {
        let s = run(crate::failures::tests::OOM).unwrap();
        assert_eq!(s.found[0].id, "memory-exceeds-free");
        let s = run(crate::failures::tests::OOM_FRAGMENTED).unwrap();
        assert_eq!(s.found[0].id, "allocator-fragmentation");
        assert_eq!(s.found[0].oom.unwrap().tried_mib, Some(2048.0));
    }

    #[test]
    fn seed_004_and_002_logs() {
        // Seed 004's "before" log and seed 002's exit code.
        let log = "Trial 182: Starting...\n\
                   torch.AcceleratorError: CUDA error: device-side assert triggered\n\
                   Location: scripts/tune_max.py:736 in run_training_eval\n\
                   Training was failing with Exit code -9 (SIGKILL)\n";
        let s = run(log).unwrap();
        let ids: Vec<&str> = s.found.iter().map(|f| f.id).collect();
        assert_eq!(ids, ["device-side-assert", "killed"]);
        assert_eq!(s.found[1].evidence[0].line, 4);
    }

    #[test]
    fn a_broken_allocator_is_named_after_the_oom_that_broke_it() {
        // pytorch#188008: the failed mapping's OOM, then the assert on
        // every later allocation, in unrelated code.
        let log = format!(
            "{}\n{}\nTraceback (most recent call last):\n{}\n",
            crate::failures::tests::OOM,
            crate::failures::tests::ALLOCATOR_BROKEN,
            crate::failures::tests::ALLOCATOR_BROKEN
        );
        let s = run(&log).unwrap();
        let ids: Vec<&str> = s.found.iter().map(|f| f.id).collect();
        assert_eq!(ids, ["memory-exceeds-free", "allocator-broken"]);
        let f = &s.found[1];
        assert_eq!(f.class, Class::AllocatorBroken);
        assert_eq!((f.matches, f.evidence[0].line), (2, 2));
        // A log of the user's own script: restart it, not `train --resume`.
        assert!(
            f.fix.contains("a smaller batch will not help") && !f.fix.contains("train --resume"),
            "{}",
            f.fix
        );
        assert!(f.cause.contains("pytorch#188008"));
        assert_eq!(f.rule, None);
    }

    #[test]
    fn nothing_known_keeps_the_last_error_line_and_bad_input_is_refused() {
        let s = run("step 1\nValueError: something else\nok\n").unwrap();
        assert!(s.found.is_empty());
        assert_eq!(
            s.last_error,
            Some(Evidence {
                line: 2,
                text: "ValueError: something else".into()
            })
        );
        assert!(format!("{:#}", run("").unwrap_err()).contains("empty"));
        let binary = scan("bin", &b"\x7fELF\x00\x01\x02"[..]).unwrap_err();
        assert!(format!("{binary:#}").contains("binary data"));
        // Invalid UTF-8 in a text log is read, not refused.
        let s = scan(
            "latin1",
            &b"caf\xe9\nRuntimeError: CUDA error: out of memory\n"[..],
        )
        .unwrap();
        assert_eq!(s.found[0].id, "memory-exceeds-free");
    }
}
