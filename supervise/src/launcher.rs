//! The launchers that start a job of several processes (ranks): torchrun
//! and its module form, accelerate's and DeepSpeed's, told from the
//! command line; and the error summary torchrun's agent prints when a rank
//! failed. Pure.

use std::path::Path;

/// The launcher a command starts with, by the name its docs give it; None
/// for a plain command.
pub fn of(argv: &[String]) -> Option<&'static str> {
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

/// How many ranks a launcher's command starts, as its own options say
/// (`options`: the words before the script): torchrun's `--nproc_per_node`
/// times `--nnodes`, accelerate's `--num_processes`, DeepSpeed's
/// `--num_gpus` times `--num_nodes`. Each with the flag it came from, or
/// why it is not known: a value such as `gpu` or `auto`, a range of nodes,
/// or one left to the launcher's own defaults or config file.
pub fn world_size(launcher: &str, options: &[String]) -> Result<(u32, String), String> {
    let value = |names: &[&str]| option_value(options, names);
    let count = |names: &[&str], default: Option<u32>| -> Result<Option<(u32, String)>, String> {
        match value(names) {
            Some((flag, v)) => match v.parse::<u32>() {
                Ok(n) if n > 0 => Ok(Some((n, format!("{flag} {v}")))),
                _ => Err(format!("{flag} {v} is not a number of processes")),
            },
            None => Ok(default.map(|d| (d, String::new()))),
        }
    };
    let (per, nodes) = match launcher {
        "torchrun" | "torch.distributed.run" | "torch.distributed.launch" => (
            count(&["--nproc_per_node", "--nproc-per-node"], Some(1))?,
            count(&["--nnodes"], Some(1))?,
        ),
        "accelerate launch" => (count(&["--num_processes"], None)?, Some((1, String::new()))),
        "deepspeed" => (
            count(&["--num_gpus"], None)?,
            count(&["--num_nodes"], Some(1))?,
        ),
        other => return Err(format!("{other} is not a launcher of ranks")),
    };
    let Some((per, per_flag)) = per else {
        return Err(format!(
            "{launcher}'s number of processes comes from its own defaults or config file"
        ));
    };
    let (nodes, node_flag) = nodes.unwrap_or((1, String::new()));
    let from: Vec<String> = [per_flag, node_flag]
        .into_iter()
        .filter(|f| !f.is_empty())
        .collect();
    let from = if from.is_empty() {
        format!("{launcher}'s default")
    } else {
        from.join(", ")
    };
    Ok((per * nodes, from))
}

/// The last value `options` give one of `names` (`--name V` or
/// `--name=V`), with the name it was given by.
fn option_value(options: &[String], names: &[&str]) -> Option<(String, String)> {
    let mut words = options.iter();
    let mut found = None;
    while let Some(w) = words.next() {
        for n in names {
            if w == n {
                found = words.clone().next().map(|v| (n.to_string(), v.clone()));
            } else if let Some(v) = w.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                found = Some((n.to_string(), v.to_string()));
            }
        }
    }
    found
}

/// The restarts torch.distributed.elastic's agent makes of the whole job
/// after a rank fails, with the same command (`--max-restarts N`, also
/// accelerate's `--max_restarts`), when `argv` gives more than 0.
pub fn restarts(argv: &[String]) -> Option<(u32, String)> {
    of(argv)?;
    let (flag, v) = option_value(options(argv), &["--max-restarts", "--max_restarts"])?;
    let n: u32 = v.parse().ok().filter(|n| *n > 0)?;
    Some((n, flag))
}

/// A launcher's own options: the words before its script.
fn options(argv: &[String]) -> &[String] {
    let script_at = crate::knobs::argv::program_args(argv).start;
    &argv[..script_at.saturating_sub(1).min(argv.len())]
}

/// The ranks `argv` starts: None for a plain command, else its launcher's
/// `world_size` (read from the words before the script).
pub fn ranks_of(argv: &[String]) -> Option<Result<(u32, String), String>> {
    let launcher = of(argv)?;
    Some(world_size(launcher, options(argv)))
}

/// The prefix torch.distributed.elastic's agent is asked to put before
/// each line of a rank (its `TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`).
pub const TAG_TEMPLATE: &str = "[rank ${rank}] ";

/// How a job's rank lines reach the supervisor.
#[derive(Clone, Debug, PartialEq)]
pub enum Lines {
    /// Tagged by the launcher once the command is `argv` and has `env`:
    /// `--tee 3` added to the launcher's options (each rank's output goes
    /// through the agent, which prefixes it), the prefix in the variable.
    Tagged {
        argv: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// Left as they come, and why.
    Untagged(String),
}

impl Lines {
    /// In words, for the summary.
    pub fn words(&self) -> String {
        match self {
            Lines::Tagged { .. } => format!(
                "tagged [rank N] by the launcher (--tee 3 added to its options, TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE={TAG_TEMPLATE:?})"
            ),
            Lines::Untagged(why) => format!("untagged: {why}"),
        }
    }
}

/// How the ranks' lines of `argv` (a launcher's command; None for any
/// other) can be tagged, the user's own choices kept (`get`: the
/// environment it inherits).
pub fn lines(argv: &[String], get: &dyn Fn(&str) -> Option<String>) -> Option<Lines> {
    let launcher = of(argv)?;
    if launcher == "deepspeed" {
        return Some(Lines::Untagged(
            "DeepSpeed's launcher has no option that tags its ranks' lines".into(),
        ));
    }
    let own = options(argv).iter().any(|w| {
        ["--tee", "-t", "--redirects", "-r"]
            .iter()
            .any(|f| w == f || w.starts_with(&format!("{f}=")))
    });
    let env_own = [
        "PET_TEE",
        "PET_REDIRECTS",
        "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
    ]
    .into_iter()
    .find(|k| get(k).is_some());
    if own || env_own.is_some() {
        let what = env_own.map_or("--tee or --redirects".to_string(), |k| format!("{k} set"));
        return Some(Lines::Untagged(format!(
            "the command chooses where its ranks' output goes ({what}): left as it is"
        )));
    }
    let at = launcher_end(argv)?;
    let mut tagged = argv.to_vec();
    tagged.splice(at..at, ["--tee".to_string(), "3".to_string()]);
    Some(Lines::Tagged {
        argv: tagged,
        env: vec![(
            "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE".into(),
            TAG_TEMPLATE.into(),
        )],
    })
}

/// `argv` as it runs: with `--tee 3` where its ranks' lines can be
/// tagged, the tag's variable then added to `env`.
pub fn tag(
    argv: Vec<String>,
    env: &mut Vec<(String, String)>,
    get: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    match lines(&argv, get) {
        Some(Lines::Tagged { argv, env: more }) => {
            env.extend(more);
            argv
        }
        _ => argv,
    }
}

/// A launcher's job as a summary gives it (`argv` as given, before
/// `tag`); None for any other command.
pub fn account(
    argv: &[String],
    get: &dyn Fn(&str) -> Option<String>,
) -> Option<common::wire::program::ProgramRanks> {
    let lines = lines(argv, get)?;
    let world_size = match ranks_of(argv) {
        Some(Ok((n, from))) => format!("{n} ({from})"),
        Some(Err(why)) => format!("not known: {why}"),
        None => "not known".into(),
    };
    Some(common::wire::program::ProgramRanks {
        launcher: of(argv).unwrap_or_default().into(),
        world_size,
        lines: lines.words(),
    })
}

/// Where the launcher's own options start: after `torchrun`, `accelerate
/// launch`, or `-m MODULE`.
fn launcher_end(argv: &[String]) -> Option<usize> {
    match name(argv.first()?).as_str() {
        "torchrun" => Some(1),
        "accelerate" => Some(2),
        _ => argv.iter().position(|w| w == "-m").map(|m| m + 2),
    }
}

/// A rank's line in words: `rank N: TEXT` where its rank is known from
/// its prefix (`said_by`), else the line as it is.
pub fn in_words(line: &str) -> String {
    match said_by(line) {
        (Some(rank), text) => format!("rank {rank}: {text}"),
        (None, text) => text.to_string(),
    }
}

/// The rank a line came from and the line without its prefix: the tag
/// asked for (`[rank N] `), torch's own prefix of a rank's error lines
/// (`[rankN]:`), or both, in that order.
pub fn said_by(line: &str) -> (Option<u32>, &str) {
    let mut rank = None;
    let mut rest = line;
    if let Some(r) = rest.strip_prefix("[rank ") {
        if let Some((n, after)) = r.split_once("] ") {
            if let Ok(n) = n.parse() {
                rank = Some(n);
                rest = after;
            }
        }
    }
    if let Some(r) = rest.strip_prefix("[rank") {
        if let Some((n, after)) = r.split_once("]:") {
            if let Ok(n) = n.parse::<u32>() {
                rank = rank.or(Some(n));
                rest = after.strip_prefix(' ').unwrap_or(after);
            }
        }
    }
    (rank, rest)
}

/// A command word's file name (`/venv/bin/torchrun`: `torchrun`).
fn name(word: &str) -> String {
    Path::new(word)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
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

    fn world(cmd: &str) -> Result<(u32, String), String> {
        let argv: Vec<String> = cmd.split(' ').map(String::from).collect();
        world_size(of(&argv).unwrap(), &argv)
    }

    #[test]
    fn the_world_size_is_read_from_the_launchers_own_options() {
        assert_eq!(
            world("torchrun --nproc_per_node 2 --nnodes=3"),
            Ok((6, "--nproc_per_node 2, --nnodes 3".into()))
        );
        assert_eq!(
            world("torchrun --standalone"),
            Ok((1, "torchrun's default".into()))
        );
        assert_eq!(
            world("python -m torch.distributed.run --nproc-per-node=4"),
            Ok((4, "--nproc-per-node 4".into()))
        );
        assert_eq!(
            world("accelerate launch --num_processes 2"),
            Ok((2, "--num_processes 2".into()))
        );
        assert!(world("accelerate launch --cpu")
            .unwrap_err()
            .contains("config file"));
        assert!(world("torchrun --nproc_per_node gpu")
            .unwrap_err()
            .contains("--nproc_per_node gpu is not a number"));
        assert!(world("torchrun --nnodes 1:4 --nproc_per_node 2").is_err());
        let argv = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            restarts(&argv(
                "torchrun --max-restarts=3 --nproc_per_node 2 t.py --max-restarts 1"
            )),
            Some((3, "--max-restarts".into()))
        );
        assert_eq!(restarts(&argv("torchrun --max-restarts 0 t.py")), None);
        assert_eq!(restarts(&argv("python t.py --max-restarts 2")), None);
        assert_eq!(
            world("deepspeed --num_gpus 8 --num_nodes 2"),
            Ok((16, "--num_gpus 8, --num_nodes 2".into()))
        );
    }

    #[test]
    fn the_ranks_lines_are_tagged_unless_the_command_chose_otherwise() {
        let argv = |c: &str| c.split(' ').map(String::from).collect::<Vec<_>>();
        let none = |_: &str| None;
        let tagged = |c: &str| match lines(&argv(c), &none) {
            Some(Lines::Tagged { argv, env }) => {
                assert_eq!(env[0].1, TAG_TEMPLATE);
                argv.join(" ")
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(
            tagged("torchrun --nproc_per_node 2 t.py --tee 1"),
            "torchrun --tee 3 --nproc_per_node 2 t.py --tee 1"
        );
        assert_eq!(
            tagged("python -u -m torch.distributed.run --standalone t.py"),
            "python -u -m torch.distributed.run --tee 3 --standalone t.py"
        );
        assert_eq!(
            tagged("/v/bin/accelerate launch --multi_gpu t.py"),
            "/v/bin/accelerate launch --tee 3 --multi_gpu t.py"
        );
        assert_eq!(lines(&argv("python t.py"), &none), None);
        let untagged = |c: &str, get: &dyn Fn(&str) -> Option<String>| match lines(&argv(c), get) {
            Some(Lines::Untagged(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(untagged("torchrun -r 3 t.py", &none).contains("--tee or --redirects"));
        assert!(untagged("torchrun --tee=1 t.py", &none).contains("left as it is"));
        let set = |k: &str| (k == "PET_TEE").then(|| "3".to_string());
        assert!(untagged("torchrun t.py", &set).contains("PET_TEE set"));
        assert!(untagged("deepspeed t.py", &none).contains("DeepSpeed"));
    }

    #[test]
    fn a_lines_rank_is_read_from_its_tag_or_torchs_prefix() {
        assert_eq!(
            said_by("[rank 1] [rank1]: RuntimeError: x"),
            (Some(1), "RuntimeError: x")
        );
        assert_eq!(
            said_by("[rank 0] {\"loss\": 1}"),
            (Some(0), "{\"loss\": 1}")
        );
        assert_eq!(said_by("[rank3]: Traceback"), (Some(3), "Traceback"));
        assert_eq!(said_by("[rankx] y"), (None, "[rankx] y"));
        assert_eq!(said_by("loss 0.5"), (None, "loss 0.5"));
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
