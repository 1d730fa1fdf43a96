//! The launchers that start a job of several processes (ranks): torchrun
//! and its module form, accelerate's and DeepSpeed's, told from the
//! command line; and the error summary torchrun's agent prints when a rank
//! failed. Pure.

use std::path::Path;

/// The launcher a command starts with, by the name its docs give it; None
/// for a plain command.
pub fn of(argv: &[String]) -> Option<&'static str> {
    let name = |w: &String| {
        Path::new(w)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let first = name(argv.first()?);
    match first.as_str() {
        "torchrun" => return Some("torchrun"),
        "deepspeed" => return Some("deepspeed"),
        "accelerate" if argv.get(1).is_some_and(|w| w == "launch") => {
            return Some("accelerate launch")
        }
        _ => {}
    }
    // python[3[.N]] [options] -m torch.distributed.run|launch
    if !first.starts_with("python") {
        return None;
    }
    // Python's own options come before the script or module: `-m` after
    // the script is the script's.
    let mut words = argv[1..].iter();
    let mut module = None;
    while let Some(w) = words.next() {
        match w.as_str() {
            "-m" => {
                module = words.next().map(String::as_str);
                break;
            }
            "-X" | "-W" => {
                words.next();
            }
            o if o.starts_with('-') && o != "-c" && o != "-" => {}
            _ => break,
        }
    }
    match module {
        Some("torch.distributed.run") => Some("torch.distributed.run"),
        Some("torch.distributed.launch") => Some("torch.distributed.launch"),
        Some("accelerate.commands.launch") => Some("accelerate launch"),
        _ => None,
    }
}

/// One rank's end as the launcher's error summary states it.
#[derive(Clone, Debug, PartialEq)]
pub struct RankEnd {
    pub rank: u32,
    pub pid: Option<u32>,
    /// Its exit code; -N: signal N ended it.
    pub exitcode: i32,
}

/// The last error summary of torch.distributed.elastic (torchrun's agent,
/// also under `accelerate launch`) in `lines`: the first observed failure
/// ("Root Cause") and the other ranks' ends ("Failures"), which followed
/// from it.
pub fn error_summary(lines: &[&str]) -> Option<(RankEnd, Vec<RankEnd>)> {
    let root_at = lines.iter().rposition(|l| {
        l.trim_start()
            .starts_with("Root Cause (first observed failure)")
    })?;
    let failures_at = lines[..root_at]
        .iter()
        .rposition(|l| l.trim() == "Failures:")
        .unwrap_or(root_at);
    let root = entries(&lines[root_at..]).into_iter().next()?;
    Some((root, entries(&lines[failures_at..root_at])))
}

/// The entries of one part of the summary: `rank : N (local_rank: M)`, then
/// `exitcode : C (pid: P)`.
fn entries(lines: &[&str]) -> Vec<RankEnd> {
    let mut out: Vec<RankEnd> = Vec::new();
    for l in lines {
        let Some((key, value)) = l.split_once(':') else {
            continue;
        };
        let first = |v: &str| {
            v.split_whitespace()
                .next()
                .and_then(|w| w.parse::<i64>().ok())
        };
        match key.trim() {
            "rank" => {
                if let Some(rank) = first(value) {
                    out.push(RankEnd {
                        rank: rank.max(0) as u32,
                        pid: None,
                        exitcode: 0,
                    });
                }
            }
            "exitcode" => {
                if let (Some(e), Some(code)) = (out.last_mut(), first(value)) {
                    e.exitcode = code as i32;
                    e.pid = value
                        .split_once("pid:")
                        .and_then(|(_, p)| p.trim().split(')').next())
                        .and_then(|p| p.trim().parse().ok());
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of_words(cmd: &str) -> Option<&'static str> {
        of(&cmd.split(' ').map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn the_launchers_are_told_from_a_plain_command() {
        assert_eq!(
            of_words("torchrun --nproc_per_node 2 t.py"),
            Some("torchrun")
        );
        assert_eq!(of_words("/venv/bin/torchrun t.py"), Some("torchrun"));
        assert_eq!(
            of_words("python3.11 -u -m torch.distributed.run --nproc_per_node 2 t.py"),
            Some("torch.distributed.run")
        );
        assert_eq!(
            of_words("accelerate launch --cpu t.py"),
            Some("accelerate launch")
        );
        assert_eq!(of_words("accelerate config"), None);
        assert_eq!(of_words("python main.py -m torch.distributed.run"), None);
        assert_eq!(
            of_words("python -X dev -m torch.distributed.launch t.py"),
            Some("torch.distributed.launch")
        );
        assert_eq!(of_words("python main.py"), None);
        assert_eq!(of_words("sh -c torchrun"), None);
    }

    /// As torch 2.13's torchrun printed it, rank 1 aborting (os.abort()).
    const SUMMARY: &str = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
=====================================================
abort.py FAILED
-----------------------------------------------------
Failures:
[1]:
  time      : 2026-11-27_18:32:03
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 737)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 737
-----------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-27_18:32:03
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 738)  (SIGABRT)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 738
=====================================================";

    #[test]
    fn the_launchers_summary_names_the_first_failure_and_the_rest() {
        let lines: Vec<&str> = SUMMARY.lines().collect();
        let (root, others) = error_summary(&lines).unwrap();
        assert_eq!(
            root,
            RankEnd {
                rank: 1,
                pid: Some(738),
                exitcode: -6
            }
        );
        assert_eq!(
            others,
            vec![RankEnd {
                rank: 0,
                pid: Some(737),
                exitcode: -15
            }]
        );
        assert_eq!(error_summary(&lines[..10]), None);
    }
}
