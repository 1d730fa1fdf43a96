//! Which trial command lines a preload server can run forked: pure, the
//! interpreter test given by the caller.

/// A Python command line a server can run: its program and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// `-m`: `target` is a module name, else the script's path as written.
    pub module: bool,
    pub target: String,
    /// The program's own arguments (after the script or module).
    pub args: Vec<String>,
    /// `-u`.
    pub unbuffered: bool,
    /// `-B`.
    pub no_bytecode: bool,
    /// `env NAME=VALUE ... python ...`: set on top of the trial's environment.
    pub env: Vec<(String, String)>,
}

impl Target {
    /// The program's `sys.argv` before runpy sets `[0]` (`-m` for a module,
    /// as python has it while it looks the module up).
    pub fn sys_argv(&self) -> Vec<String> {
        let first = if self.module { "-m" } else { &self.target };
        std::iter::once(first.to_string())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// Reads `argv` as `[(env (NAME=VALUE)*)?, interpreter, (-u|-B)*, script,
/// args..]` or `[.., interpreter, (-u|-B)*, -m, module, args..]`, where
/// `is_interpreter(word)` says whether a word names the server's
/// interpreter; else why not, in words for the user.
pub fn classify(argv: &[String], is_interpreter: &dyn Fn(&str) -> bool) -> Result<Target, String> {
    let mut words = argv.iter().peekable();
    let first = words.next().ok_or("the command is empty")?;
    let mut env = Vec::new();
    let interp = if base_name(first) == "env" && !is_interpreter(first) {
        after_env(&mut words, &mut env)?
    } else {
        first
    };
    if !is_interpreter(interp) {
        return Err(format!(
            "its program {interp} is not the preloaded interpreter"
        ));
    }
    let mut unbuffered = false;
    let mut no_bytecode = false;
    let mut module = None;
    while let Some(w) = words.peek() {
        let Some(flags) = w.strip_prefix('-') else {
            break;
        };
        if flags.is_empty() || flags.starts_with('-') {
            return Err(format!("python option {w} (only -u, -B and -m run forked)"));
        }
        words.next();
        for (i, c) in flags.char_indices() {
            match c {
                'u' => unbuffered = true,
                'B' => no_bytecode = true,
                'm' => {
                    let rest = &flags[i + 1..];
                    module = Some(if rest.is_empty() {
                        words.next().cloned().ok_or("python -m names no module")?
                    } else {
                        rest.to_string()
                    });
                    break;
                }
                _ => {
                    return Err(format!(
                        "python option -{c} (only -u, -B and -m run forked)"
                    ))
                }
            }
        }
        if module.is_some() {
            break;
        }
    }
    let (is_module, target) = match module {
        Some(m) => {
            check_module(&m).map_err(|e| format!("python -m {m}: {e}"))?;
            (true, m)
        }
        None => (
            false,
            words
                .next()
                .cloned()
                .ok_or("python runs no program (interactive)")?,
        ),
    };
    Ok(Target {
        module: is_module,
        target,
        args: words.cloned().collect(),
        unbuffered,
        no_bytecode,
        env,
    })
}

/// The program env(1) runs, its `NAME=VALUE` words put in `env`.
fn after_env<'a>(
    words: &mut std::iter::Peekable<std::slice::Iter<'a, String>>,
    env: &mut Vec<(String, String)>,
) -> Result<&'a String, String> {
    while let Some(kv) = words.peek().and_then(|w| assignment(w)) {
        env.push(kv);
        words.next();
    }
    match words.next() {
        Some(w) if w.starts_with('-') => Err(format!("it runs env with option {w}")),
        Some(w) => Ok(w),
        None => Err("env runs no program".into()),
    }
}

/// A module name as Python imports it: dotted identifiers
/// (`transformers.trainer`); else what was expected.
pub fn check_module(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
                && chars.all(|c| c == '_' || c.is_alphanumeric())
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected a module name as Python imports it (e.g. torch or transformers.trainer), found {name:?}"
        ))
    }
}

fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `NAME=VALUE` as env(1) reads it.
fn assignment(word: &str) -> Option<(String, String)> {
    let (k, v) = word.split_once('=')?;
    let valid = !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars().all(|c| c == '_' || c.is_ascii_alphanumeric());
    valid.then(|| (k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn ours(w: &str) -> bool {
        w == "/venv/bin/python" || w == "python"
    }

    fn ok(s: &str) -> Target {
        classify(&words(s), &ours).unwrap()
    }

    fn why(s: &str) -> String {
        classify(&words(s), &ours).unwrap_err()
    }

    #[test]
    fn a_script_with_its_arguments_and_options() {
        let t = ok("/venv/bin/python -u -B train.py --lr 0.01");
        assert_eq!(
            t,
            Target {
                module: false,
                target: "train.py".into(),
                args: words("--lr 0.01"),
                unbuffered: true,
                no_bytecode: true,
                env: vec![],
            }
        );
        assert_eq!(t.sys_argv(), words("train.py --lr 0.01"));
        let t = ok("python -uB train.py");
        assert!(t.unbuffered && t.no_bytecode && t.args.is_empty());
    }

    #[test]
    fn a_module_in_each_spelling() {
        for s in [
            "python -m pkg.train --x 1",
            "python -u -mpkg.train --x 1",
            "python -um pkg.train --x 1",
        ] {
            let t = ok(s);
            assert!(t.module, "{s}");
            assert_eq!(t.target, "pkg.train", "{s}");
            assert_eq!(t.args, words("--x 1"), "{s}");
            assert_eq!(t.sys_argv(), words("-m --x 1"), "{s}");
        }
    }

    #[test]
    fn env_and_its_assignments_before_the_interpreter() {
        let t = ok("/usr/bin/env A=1 B_2=x=y /venv/bin/python t.py a=b");
        assert_eq!(
            t.env,
            vec![("A".into(), "1".into()), ("B_2".into(), "x=y".into())]
        );
        assert_eq!(t.args, ["a=b"]);
        assert!(why("/usr/bin/env -i python t.py").contains("env with option -i"));
        assert!(why("/usr/bin/env A=1").contains("env runs no program"));
    }

    #[test]
    fn what_runs_fresh_and_why() {
        assert!(why("bash run.sh").contains("bash is not the preloaded interpreter"));
        assert!(why("/usr/bin/python3 t.py").contains("not the preloaded"));
        assert!(why("/usr/bin/env python3 t.py").contains("python3 is not the preloaded"));
        assert!(why("python -O t.py").contains("python option -O"));
        assert!(why("python -X dev t.py").contains("python option -X"));
        assert!(why("python -c print(1)").contains("python option -c"));
        assert!(why("python - t.py").contains("python option -"));
        assert!(why("python --version").contains("python option --version"));
        assert!(why("python -u").contains("interactive"));
        assert!(why("python -m").contains("names no module"));
        assert!(why("python -m 1x").contains("module name"));
        assert_eq!(classify(&[], &ours).unwrap_err(), "the command is empty");
    }

    #[test]
    fn module_names() {
        for good in ["torch", "transformers.trainer", "_x.y_1", "données"] {
            assert!(check_module(good).is_ok(), "{good}");
        }
        for bad in ["", "torch.", ".x", "a..b", "1x", "a-b", "a b", "x/y"] {
            assert!(check_module(bad).is_err(), "{bad:?}");
        }
    }
}
