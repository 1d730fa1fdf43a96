//! The known fixes, applied to any command through its environment: the
//! allocator's `expandable_segments:True` (seed 004's fragmentation) under
//! the variable its torch reads, its GPU slot, its share of the CPU threads,
//! and `CUDA_LAUNCH_BLOCKING=1` for a rerun after a device-side assert.
//! `fixes` is pure; `torch_version` asks an interpreter.

use std::path::Path;
use std::process::{Command, Stdio};

/// torch's (major, minor, patch), when known: the patch matters, since
/// 2.9.1 reads the allocator variable differently from 2.9.0.
pub type TorchVersion = Option<(u32, u32, u32)>;

/// What a command gets.
pub struct Wants<'a> {
    /// The GPU slot (`CUDA_VISIBLE_DEVICES`), if it has one.
    pub gpu: Option<&'a str>,
    /// Its share of the CPU threads when trials share a CPU.
    pub threads: Option<usize>,
    /// The processes that share them: a launcher's ranks (1 for any other
    /// command), each of which gets `threads / ranks`.
    pub ranks: usize,
    /// A rerun that should name the failing kernel.
    pub launch_blocking: bool,
}

impl Wants<'_> {
    /// A command run as it stands: no GPU slot, no share of the threads,
    /// one process.
    pub const PLAIN: Wants<'static> = Wants {
        gpu: None,
        threads: None,
        ranks: 1,
        launch_blocking: false,
    };
}

/// The fixes a command run as it stands gets (`Wants::PLAIN`), with the
/// torch of the python `argv` runs (asked of it: a process).
pub fn fixes_for_command(get: &dyn Fn(&str) -> Option<String>, argv: &[String]) -> Fixes {
    let torch = python_of(argv).as_deref().and_then(torch_version);
    fixes(get, torch, &Wants::PLAIN)
}

/// The variables to set, and a line for each that says why.
#[derive(Debug, Default, PartialEq)]
pub struct Fixes {
    pub set: Vec<(String, String)>,
    pub said: Vec<String>,
}

const EXPANDABLE: &str = "expandable_segments:True";

/// The fixes for a command, given the environment it inherits (`get`) and
/// its torch's version: each is skipped where the user set the variable.
pub fn fixes(get: &dyn Fn(&str) -> Option<String>, torch: TorchVersion, wants: &Wants) -> Fixes {
    let mut f = Fixes::default();
    let mut set = |k: &str, v: &str, why: String| {
        f.set.push((k.to_string(), v.to_string()));
        f.said.push(format!("{k}={v} ({why})"));
    };
    let (new, old) = (get("PYTORCH_ALLOC_CONF"), get("PYTORCH_CUDA_ALLOC_CONF"));
    match (new, old) {
        (None, None) => {
            let which = match torch {
                Some((a, b, c)) => format!("torch {a}.{b}.{c} reads {}", reads(torch)),
                None => "torch's version unknown: both names".to_string(),
            };
            for name in alloc_names(torch) {
                set(
                    name,
                    EXPANDABLE,
                    format!(
                        "without it, fragmentation (\"reserved by PyTorch but unallocated\") can end a long run; {which}; set PYTORCH_ALLOC_CONF yourself to choose"
                    ),
                );
            }
        }
        // The user's own setting, under the name a torch between 2.9.1 and
        // 2.11 ignores: copied to the name it reads, or it does nothing.
        (Some(v), None) if ignores_new_name(torch) => {
            let (a, b, c) = torch.unwrap_or_default();
            set(
                "PYTORCH_CUDA_ALLOC_CONF",
                &v,
                format!(
                    "your PYTORCH_ALLOC_CONF, under the name torch {a}.{b}.{c} reads: it ignores PYTORCH_ALLOC_CONF for expandable segments (pytorch#183387, fixed by 2.11)"
                ),
            );
        }
        _ => {}
    }
    if let Some(gpu) = wants.gpu {
        if get("CUDA_VISIBLE_DEVICES").is_none() {
            set("CUDA_VISIBLE_DEVICES", gpu, "its GPU slot".to_string());
        }
    }
    if let Some(n) = wants.threads {
        if get("OMP_NUM_THREADS").is_none() {
            let ranks = wants.ranks.max(1);
            let why = "its share of the cores free as it started, among the trials at once";
            let (each, why) = match ranks {
                1 => (n, why.to_string()),
                r => (
                    (n / r).max(1),
                    format!("{why} ({n}), split between its {r} ranks"),
                ),
            };
            set("OMP_NUM_THREADS", &each.to_string(), why);
        }
    }
    if wants.launch_blocking {
        set(
            "CUDA_LAUNCH_BLOCKING",
            "1",
            "a rerun after a device-side assert, so the error names its kernel".to_string(),
        );
    }
    f
}

/// torch 2.9.1 (and 2.10, until 2.11 was verified fixed) leaves
/// `expandable_segments` off when it is set under PYTORCH_ALLOC_CONF, the
/// name 2.9 introduced; only the deprecated PYTORCH_CUDA_ALLOC_CONF works
/// (pytorch#183387: "silently ignored for CUDA in 2.9.1").
fn ignores_new_name(torch: TorchVersion) -> bool {
    torch.is_some_and(|v| ((2, 9, 1)..(2, 11, 0)).contains(&v))
}

/// The allocator variables to set for a torch: its own name, both where it
/// ignores its own name (the old one works, the new one is ready for an
/// upgrade) or where the version is unknown.
fn alloc_names(torch: TorchVersion) -> &'static [&'static str] {
    const BOTH: &[&str] = &["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"];
    match torch {
        _ if ignores_new_name(torch) => BOTH,
        // torch 2.9 renamed the variable; the old name still works there
        // but is deprecated, so a torch that reads the new one gets it only.
        Some(v) if v >= (2, 9, 0) => &["PYTORCH_ALLOC_CONF"],
        Some(_) => &["PYTORCH_CUDA_ALLOC_CONF"],
        None => BOTH,
    }
}

/// Which name a known torch reads, in words.
fn reads(torch: TorchVersion) -> &'static str {
    if ignores_new_name(torch) {
        "only PYTORCH_CUDA_ALLOC_CONF for expandable segments (pytorch#183387, fixed by 2.11)"
    } else if torch.is_some_and(|v| v >= (2, 9, 0)) {
        "PYTORCH_ALLOC_CONF"
    } else {
        "PYTORCH_CUDA_ALLOC_CONF"
    }
}

/// The version of torch that `interpreter` would import, read from its
/// package metadata (no `import torch`, which costs seconds); None when it
/// is not a Python with torch.
pub fn torch_version(interpreter: &Path) -> TorchVersion {
    let out = Command::new(interpreter)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('torch'))",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

/// "2.9.1+cu128" -> (2, 9, 1); a missing or non-numeric patch ("2.11",
/// "2.12.0a0", "2.10.0.dev20250101") reads as far as its digits go.
pub fn parse_version(text: &str) -> TorchVersion {
    let text = text.trim();
    let public = text.split('+').next()?;
    let mut it = public.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    let digits: String = it
        .next()
        .unwrap_or("0")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor, digits.parse().unwrap_or(0)))
}

/// The interpreter a command runs, when its program is a Python (`python`,
/// `python3.12`, a venv's), looked up on PATH.
pub fn python_of(argv: &[String]) -> Option<std::path::PathBuf> {
    let mut words = argv.iter();
    let mut first = words.next()?;
    // `/usr/bin/env python ...` and `env VAR=1 python ...`.
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        first = words.find(|w| !w.contains('=') && !w.starts_with('-'))?;
    }
    let name = Path::new(first).file_name()?.to_str()?;
    if !name.starts_with("python") {
        return None;
    }
    if first.contains('/') {
        return Some(first.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(first))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_allocator_variable_follows_torchs_version() {
        let names = |t| -> Vec<String> {
            fixes(&none, t, &Wants::PLAIN)
                .set
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        let both = ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"];
        let v = |s| parse_version(s);
        assert_eq!(names(v("2.11.0")), ["PYTORCH_ALLOC_CONF"]);
        assert_eq!(names(v("2.13.0+cu130")), ["PYTORCH_ALLOC_CONF"]);
        assert_eq!(names(v("2.9.0")), ["PYTORCH_ALLOC_CONF"]);
        // pytorch#183387: 2.9.1 ignores the new name for expandable
        // segments; the old one is what works, up to 2.11.
        assert_eq!(names(v("2.9.1")), both);
        assert_eq!(names(v("2.9.1+cu128")), both);
        assert_eq!(names(v("2.10.0")), both);
        assert_eq!(names(v("2.8.0")), ["PYTORCH_CUDA_ALLOC_CONF"]);
        let said = fixes(&none, v("2.9.1+cu128"), &Wants::PLAIN).said;
        assert!(
            said[0].contains("torch 2.9.1 reads only PYTORCH_CUDA_ALLOC_CONF"),
            "{said:?}"
        );
        assert_eq!(
            names(None),
            ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"]
        );
    }

    #[test]
    fn a_jobs_ranks_split_its_threads() {
        let wants = |ranks| Wants {
            gpu: None,
            threads: Some(5),
            launch_blocking: false,
            ranks,
        };
        let omp = |w: &Wants| fixes(&none, Some((2, 13, 0)), w);
        let f = omp(&wants(2));
        assert_eq!(f.set[1], ("OMP_NUM_THREADS".into(), "2".into()));
        assert!(f.said[1].ends_with("among the trials at once (5), split between its 2 ranks)"));
        assert_eq!(omp(&wants(8)).set[1].1, "1");
        assert_eq!(omp(&wants(1)).set[1].1, "5");
    }

    #[test]
    fn what_the_user_set_is_left_alone() {
        let old =
            |k: &str| (k == "PYTORCH_CUDA_ALLOC_CONF").then(|| "max_split_size_mb:128".into());
        assert!(fixes(&old, None, &Wants::PLAIN).set.is_empty());
        let all = |_: &str| Some("x".to_string());
        let wants = Wants {
            gpu: Some("1"),
            threads: Some(4),
            ranks: 1,
            launch_blocking: true,
        };
        // Only CUDA_LAUNCH_BLOCKING, which a rerun asks for, is set.
        let f = fixes(&all, None, &wants);
        assert_eq!(f.set, [("CUDA_LAUNCH_BLOCKING".into(), "1".into())]);
        let f = fixes(&none, Some((2, 11, 0)), &wants);
        let keys: Vec<&str> = f.set.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "PYTORCH_ALLOC_CONF",
                "CUDA_VISIBLE_DEVICES",
                "OMP_NUM_THREADS",
                "CUDA_LAUNCH_BLOCKING"
            ]
        );
        assert!(f.said[0].contains("fragmentation"));
    }

    #[test]
    fn a_users_new_name_is_copied_where_torch_ignores_it() {
        let user = |k: &str| (k == "PYTORCH_ALLOC_CONF").then(|| EXPANDABLE.to_string());
        for t in ["2.9.1", "2.9.1+cu128", "2.10.0"] {
            let f = fixes(&user, parse_version(t), &Wants::PLAIN);
            assert_eq!(
                f.set,
                [("PYTORCH_CUDA_ALLOC_CONF".into(), EXPANDABLE.into())],
                "{t}"
            );
            assert!(f.said[0].contains("pytorch#183387"));
        }
        for t in ["2.9.0", "2.11.0", "2.8.0"] {
            assert!(
                fixes(&user, parse_version(t), &Wants::PLAIN).set.is_empty(),
                "{t}"
            );
        }
        // Both set, or the version unknown: the user's choice stands.
        let both = |_: &str| Some(EXPANDABLE.to_string());
        assert!(fixes(&both, parse_version("2.9.1"), &Wants::PLAIN)
            .set
            .is_empty());
        assert!(fixes(&user, None, &Wants::PLAIN).set.is_empty());
    }

    #[test]
    fn versions_and_interpreters_are_read() {
        assert_eq!(parse_version("2.11.0+cpu\n"), Some((2, 11, 0)));
        assert_eq!(parse_version("2.9.1+cu128"), Some((2, 9, 1)));
        assert_eq!(parse_version("2.8.0"), Some((2, 8, 0)));
        assert_eq!(parse_version("2.10"), Some((2, 10, 0)));
        assert_eq!(parse_version("2.12.0a0+git1234"), Some((2, 12, 0)));
        assert_eq!(parse_version("2.9.1rc1"), Some((2, 9, 1)));
        assert_eq!(parse_version("garbage"), None);
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            python_of(&argv("/opt/venv/bin/python3 main.py")),
            Some("/opt/venv/bin/python3".into())
        );
        assert_eq!(python_of(&argv("bash run.sh")), None);
        assert_eq!(
            python_of(&argv("/usr/bin/env A=1 /x/python train.py")),
            Some("/x/python".into())
        );
    }
}
