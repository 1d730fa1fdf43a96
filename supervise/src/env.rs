//! The known fixes, applied to any command through its environment: the
//! allocator's `expandable_segments:True` (seed 004's fragmentation) under
//! the variable its torch reads, its GPU slot, its share of the CPU threads,
//! and `CUDA_LAUNCH_BLOCKING=1` for a rerun after a device-side assert.
//! `fixes` is pure; `torch_version` asks an interpreter.

use std::path::Path;
use std::process::{Command, Stdio};

/// torch's (major, minor), when known.
pub type TorchVersion = Option<(u32, u32)>;

/// What a command gets.
pub struct Wants<'a> {
    /// The GPU slot (`CUDA_VISIBLE_DEVICES`), if it has one.
    pub gpu: Option<&'a str>,
    /// Its share of the CPU threads when trials share a CPU.
    pub threads: Option<usize>,
    /// A rerun that should name the failing kernel.
    pub launch_blocking: bool,
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
    if get("PYTORCH_ALLOC_CONF").is_none() && get("PYTORCH_CUDA_ALLOC_CONF").is_none() {
        // torch 2.9 renamed the variable; the old name still works there
        // but is deprecated, so a known torch gets its own name only.
        let names: &[&str] = match torch {
            Some(v) if v >= (2, 9) => &["PYTORCH_ALLOC_CONF"],
            Some(_) => &["PYTORCH_CUDA_ALLOC_CONF"],
            None => &["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"],
        };
        let which = match torch {
            Some((a, b)) => format!("torch {a}.{b} reads it"),
            None => "torch's version unknown: both names".to_string(),
        };
        for name in names {
            set(
                name,
                EXPANDABLE,
                format!(
                    "fragmentation ends long runs (seed 004); {which}; set PYTORCH_ALLOC_CONF yourself to choose"
                ),
            );
        }
    }
    if let Some(gpu) = wants.gpu {
        if get("CUDA_VISIBLE_DEVICES").is_none() {
            set("CUDA_VISIBLE_DEVICES", gpu, "its GPU slot".to_string());
        }
    }
    if let Some(n) = wants.threads {
        if get("OMP_NUM_THREADS").is_none() {
            set(
                "OMP_NUM_THREADS",
                &n.to_string(),
                "its share of the cores among parallel trials".to_string(),
            );
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

/// "2.11.0+cpu" -> (2, 11).
pub fn parse_version(text: &str) -> TorchVersion {
    let mut it = text.trim().split(['.', '+']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
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

    const PLAIN: Wants = Wants {
        gpu: None,
        threads: None,
        launch_blocking: false,
    };

    #[test]
    fn the_allocator_variable_follows_torchs_version() {
        let names = |t| -> Vec<String> {
            fixes(&none, t, &PLAIN)
                .set
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        assert_eq!(names(Some((2, 11))), ["PYTORCH_ALLOC_CONF"]);
        assert_eq!(names(Some((2, 9))), ["PYTORCH_ALLOC_CONF"]);
        assert_eq!(names(Some((2, 8))), ["PYTORCH_CUDA_ALLOC_CONF"]);
        assert_eq!(
            names(None),
            ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"]
        );
    }

    #[test]
    fn what_the_user_set_is_left_alone() {
        let old =
            |k: &str| (k == "PYTORCH_CUDA_ALLOC_CONF").then(|| "max_split_size_mb:128".into());
        assert!(fixes(&old, None, &PLAIN).set.is_empty());
        let all = |_: &str| Some("x".to_string());
        let wants = Wants {
            gpu: Some("1"),
            threads: Some(4),
            launch_blocking: true,
        };
        // Only CUDA_LAUNCH_BLOCKING, which a rerun asks for, is set.
        let f = fixes(&all, None, &wants);
        assert_eq!(f.set, [("CUDA_LAUNCH_BLOCKING".into(), "1".into())]);
        let f = fixes(&none, Some((2, 11)), &wants);
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
        assert!(f.said[0].contains("seed 004"));
    }

    #[test]
    fn versions_and_interpreters_are_read() {
        assert_eq!(parse_version("2.11.0+cpu\n"), Some((2, 11)));
        assert_eq!(parse_version("2.8.0"), Some((2, 8)));
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
