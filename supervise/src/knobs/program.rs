//! The Python program a command runs, for reading its flags from argparse
//! itself (`argparse`): the interpreter the command runs it with and its
//! main file or module. `python [opts] train.py`, `python -m pkg.train`
//! (under `env` or a wrapper's `conda run ... python` too), a launcher's
//! script (`torchrun ... train.py`, `accelerate launch train.py`: the
//! launcher's own interpreter, from its `#!` line), and an executable Python
//! file (`./train.py`, or a console entry point found on PATH: its `#!`
//! line names the interpreter, and the file itself is the script).

use super::argv;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A Python program as a command runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub python: PathBuf,
    pub main: Main,
    /// Where its own arguments start in the command.
    pub args_at: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Main {
    /// A file, as the command names it (a path, or found on PATH).
    Script(PathBuf),
    /// `-m MODULE`.
    Module(String),
}

/// The Python program `argv` runs (its words resolved from `cwd`), or None
/// where it is not one this can tell (`-c`, a shell script, `uv run`).
pub fn of(argv: &[String], cwd: Option<&Path>) -> Option<Program> {
    let args_at = argv::program_args(argv).start;
    if args_at == 0 || args_at > argv.len() {
        return None;
    }
    let main_word = &argv[args_at - 1];
    let flag = args_at.checked_sub(2).map(|i| argv[i].as_str());
    let (main, before) = match flag {
        Some("-c") => return None,
        Some("-m") => (Main::Module(main_word.clone()), args_at - 2),
        _ => (Main::Script(from_cwd(main_word, cwd)), args_at - 1),
    };
    let python = match argv[..before].iter().rposition(|w| is_python(w)) {
        Some(i) => resolve(&argv[i], cwd)?,
        // A launcher (its interpreter runs the script too) or the
        // executable script itself.
        None => {
            let exe = argv.iter().position(|w| !is_env(w) && !w.contains('='))?;
            let file = resolve(&argv[exe], cwd)?;
            let python = interpreter_of(&file, cwd)?;
            let main = match main {
                Main::Script(_) if exe == before => Main::Script(file),
                m => m,
            };
            return Some(Program {
                python,
                main,
                args_at,
            });
        }
    };
    Some(Program {
        python,
        main,
        args_at,
    })
}

fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_python(word: &str) -> bool {
    base(word).starts_with("python") && !word.ends_with(".py")
}

fn is_env(word: &str) -> bool {
    base(word) == "env" || word.starts_with('-')
}

/// A path as seen from `cwd`.
fn from_cwd(word: &str, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(c) => c.join(word),
        None => PathBuf::from(word),
    }
}

/// A command's word as a file: a path from `cwd`, else the first on PATH.
fn resolve(word: &str, cwd: Option<&Path>) -> Option<PathBuf> {
    if word.contains('/') {
        return Some(from_cwd(word, cwd));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(word))
        .find(|p| p.is_file())
}

/// The Python interpreter of an executable file's `#!` line (`#!/usr/bin/env
/// python3` too, and pip's `#!/bin/sh` one whose next line execs it).
fn interpreter_of(file: &Path, cwd: Option<&Path>) -> Option<PathBuf> {
    let mut head = [0u8; 512];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let text = String::from_utf8_lossy(&head[..n]);
    let mut lines = text.lines();
    let words: Vec<&str> = lines
        .next()?
        .strip_prefix("#!")?
        .split_whitespace()
        .collect();
    let word = match words.as_slice() {
        [env, rest @ ..] if base(env) == "env" => rest.iter().find(|w| !w.starts_with('-'))?,
        [sh, ..] if base(sh) == "sh" => lines
            .next()?
            .strip_prefix("'''exec' ")?
            .split_whitespace()
            .next()?
            .trim_matches(['"', '\'']),
        [first, ..] => first,
        [] => return None,
    };
    is_python(word).then(|| resolve(word, cwd)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn executable(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_interpreter_and_main_of_each_way_to_run_python() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let cwd = Some(d);
        let py = d.join("venv/bin/python3");
        std::fs::create_dir_all(py.parent().unwrap()).unwrap();
        let prog = |python: &Path, main: Main, args_at| Program {
            python: python.to_path_buf(),
            main,
            args_at,
        };
        let script = Main::Script(d.join("train.py"));
        let cmd = format!("{} -u train.py --bs 8", py.display());
        assert_eq!(of(&words(&cmd), cwd), Some(prog(&py, script.clone(), 3)));
        let cmd = format!("env A=1 {} -m pkg.train --bs 8", py.display());
        let module = Main::Module("pkg.train".into());
        assert_eq!(of(&words(&cmd), cwd), Some(prog(&py, module, 5)));
        // A launcher module's script, and a wrapper before the python.
        let cmd = format!(
            "conda run -n x {} -m torch.distributed.run --nproc_per_node 2 train.py --bs 8",
            py.display()
        );
        assert_eq!(of(&words(&cmd), cwd), Some(prog(&py, script.clone(), 10)));
        // A launcher runs the script with its own interpreter (its #!).
        executable(d, "torchrun", &format!("#!{}\nimport sys\n", py.display()));
        let cmd = "./torchrun --nproc_per_node 2 train.py --bs 8";
        assert_eq!(of(&words(cmd), cwd), Some(prog(&py, script, 4)));
        // An executable script: `#!/usr/bin/env python3`, pip's sh form.
        executable(d, "t.py", "#!/usr/bin/env -S python3 -u\nprint()\n");
        let got = of(&words("./t.py --bs 8"), cwd).unwrap();
        assert_eq!(got.main, Main::Script(d.join("./t.py")));
        assert!(got.python.ends_with("python3") && got.python.is_absolute());
        let sh = format!(
            "#!/bin/sh\n'''exec' \"{}\" \"$0\" \"$@\"\n' '''\nimport sys\n",
            py.display()
        );
        executable(d, "train-entry", &sh);
        assert_eq!(
            of(&words("./train-entry --bs 8"), cwd),
            Some(prog(&py, Main::Script(d.join("./train-entry")), 1))
        );
        // Not a Python program this can tell.
        executable(d, "run.sh", "#!/bin/bash\npython train.py \"$@\"\n");
        for cmd in ["./run.sh --bs 8", "python3 -c pass --bs 8", "./nope --bs 8"] {
            assert_eq!(of(&words(cmd), cwd), None, "{cmd}");
        }
    }
}
