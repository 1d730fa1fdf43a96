//! A space that names the user's `program` (W&B's meaning): the program
//! block (`program`, `command`, `working_dir`, `preload`, `auto_fix`,
//! `fix`, `max_attempts`, `ranks_per_trial`), its command checked before
//! any trial, a trial's parameters as the program gets them, and the
//! `${config}` file (the base config with the trial's values at their
//! dotted keys, comments kept).

use super::*;
use crate::trial::Choice;
use serde_json::Value as Json;

/// The space's keys of the program block, as found (`get`: the space's
/// top-level key).
pub(super) struct ProgramKeys<'a> {
    pub program: Option<&'a Value>,
    pub command: Option<&'a Value>,
    pub working_dir: Option<&'a Value>,
    pub preload: Option<&'a Value>,
    pub auto_fix: Option<&'a Value>,
    pub fix: Option<&'a Value>,
    pub max_attempts: Option<&'a Value>,
    pub ranks_per_trial: Option<&'a Value>,
}

impl<'a> ProgramKeys<'a> {
    pub fn of(get: &dyn Fn(&str) -> Option<&'a Value>) -> ProgramKeys<'a> {
        ProgramKeys {
            program: get("program"),
            command: get("command"),
            working_dir: get("working_dir"),
            preload: get("preload"),
            auto_fix: get("auto_fix"),
            fix: get("fix"),
            max_attempts: get("max_attempts"),
            ranks_per_trial: get("ranks_per_trial"),
        }
    }
}

impl Reader<'_> {
    /// The program block; without `program`, `command` is W&B's only and
    /// ignored (said), and the block's other keys are refused.
    pub(super) fn program(&mut self, keys: &ProgramKeys) -> anyhow::Result<Option<Program>> {
        let (command, working_dir, preload) = (keys.command, keys.working_dir, keys.preload);
        let Some(program) = keys.program else {
            if command.is_some() {
                self.warn(
                    "command",
                    "ignored: without `program`, train sweep runs train itself with each trial's config",
                );
            }
            for (key, v) in [
                ("working_dir", working_dir),
                ("preload", preload),
                ("auto_fix", keys.auto_fix),
                ("fix", keys.fix),
                ("max_attempts", keys.max_attempts),
                ("ranks_per_trial", keys.ranks_per_trial),
            ] {
                if v.is_some() {
                    return Err(self.err(key, "only for a space that names `program`"));
                }
            }
            return Ok(None);
        };
        let file = match program.as_str() {
            Some(f) if !f.trim().is_empty() => f.to_string(),
            _ => {
                return Err(self.err(
                    "program",
                    format!(
                        "expected the program's file (e.g. main.py, relative to where train sweep starts), found {}",
                        show(program)
                    ),
                ))
            }
        };
        let command = match command {
            None => None,
            Some(v) => {
                let list = v.as_sequence().ok_or_else(|| {
                    self.err(
                        "command",
                        format!("expected a list of strings, e.g. [${{env}}, ${{interpreter}}, ${{program}}, ${{args}}], found {}", show(v)),
                    )
                })?;
                let words = list
                    .iter()
                    .enumerate()
                    .map(|(i, w)| match w {
                        Value::String(s) => Ok(s.clone()),
                        Value::Number(_) | Value::Bool(_) => Ok(show(w)),
                        _ => Err(self.err(
                            &format!("command[{i}]"),
                            format!("expected a string, found {}", show(w)),
                        )),
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Some(words)
            }
        };
        Ok(Some(Program {
            file,
            command,
            work_in_trial: self.work_in_trial(working_dir)?,
            preload: self.preload(preload)?,
            auto_fix: self.auto_fix(keys)?,
            ranks_per_trial: self.ranks_per_trial(keys.ranks_per_trial)?,
        }))
    }

    /// `working_dir`: `launch` (the default) or `trial`.
    fn work_in_trial(&self, working_dir: Option<&Value>) -> anyhow::Result<bool> {
        match working_dir.map(|v| (v, v.as_str())) {
            None | Some((_, Some("launch"))) => Ok(false),
            Some((_, Some("trial"))) => Ok(true),
            Some((v, _)) => {
                Err(self.err(
                    "working_dir",
                    format!(
                        "expected launch (the default: where train sweep starts) or trial (each trial in its own directory), found {}",
                        show(v)
                    ),
                ))
            }
        }
    }

    /// `ranks_per_trial: N`, a whole number from 1.
    fn ranks_per_trial(&self, v: Option<&Value>) -> anyhow::Result<Option<u32>> {
        let Some(v) = v else {
            return Ok(None);
        };
        match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if n >= 1 => Ok(Some(n)),
            _ => Err(self.err(
                "ranks_per_trial",
                format!(
                    "expected the number of ranks each trial's job starts (a whole number from 1, e.g. 2 for torchrun --nproc_per_node 2), found {}",
                    show(v)
                ),
            )),
        }
    }

    /// `auto_fix: true`, with `fix: {knob: name}` and `max_attempts: N`
    /// only beside it.
    fn auto_fix(&self, keys: &ProgramKeys) -> anyhow::Result<Option<AutoFix>> {
        let on = match keys.auto_fix {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(self.err(
                    "auto_fix",
                    format!("expected true or false, found {}", show(v)),
                ))
            }
        };
        if !on {
            for (key, v) in [("fix", keys.fix), ("max_attempts", keys.max_attempts)] {
                if v.is_some() {
                    return Err(self.err(key, "only with `auto_fix: true`"));
                }
            }
            return Ok(None);
        }
        let mut knobs = Vec::new();
        if let Some(v) = keys.fix {
            let map = v.as_mapping().ok_or_else(|| {
                self.err(
                    "fix",
                    format!("expected a mapping of settings to your names for them, e.g. {{batch: bsz, accumulation: accum_steps}}, found {}", show(v)),
                )
            })?;
            for (k, name) in map {
                let key = k.as_str().unwrap_or_default();
                let path = format!("fix.{key}");
                let knob = diagnose::knobs::Knob::parse(key).map_err(|e| self.err(&path, e))?;
                let name = match name.as_str() {
                    Some(n) if !n.trim().is_empty() => n.trim().to_string(),
                    _ => {
                        return Err(self.err(
                            &path,
                            format!("expected the name of a flag your program defines or a key of its config, found {}", show(name)),
                        ))
                    }
                };
                knobs.push((knob, name));
            }
        }
        let max_attempts = match keys.max_attempts {
            None => diagnose::ladder::MAX_ATTEMPTS,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=100) => n as u32,
                _ => {
                    return Err(self.err(
                        "max_attempts",
                        format!(
                            "expected a whole number of attempts from 1 to 100, found {}",
                            show(v)
                        ),
                    ))
                }
            },
        };
        Ok(Some(AutoFix {
            knobs,
            max_attempts,
        }))
    }

    /// `preload: [torch, transformers.trainer]`: module names as Python
    /// imports them, repeats dropped.
    fn preload(&self, v: Option<&Value>) -> anyhow::Result<Vec<String>> {
        let Some(v) = v else {
            return Ok(Vec::new());
        };
        let list = v.as_sequence().ok_or_else(|| {
            self.err(
                "preload",
                format!(
                    "expected a list of modules to import once for all trials, e.g. [torch, transformers.trainer], found {}",
                    show(v)
                ),
            )
        })?;
        let mut modules: Vec<String> = Vec::new();
        for (i, m) in list.iter().enumerate() {
            let name = m.as_str().unwrap_or_default();
            supervise::preload::check_module(name).map_err(|e| {
                let e = if m.is_string() {
                    e
                } else {
                    format!("expected a module name (e.g. torch), found {}", show(m))
                };
                self.err(&format!("preload[{i}]"), e)
            })?;
            if !modules.iter().any(|k| k == name) {
                modules.push(name.to_string());
            }
        }
        Ok(modules)
    }

    /// The command expanded once with each parameter at its first value:
    /// an unknown macro, or one inside a longer word, fails here, before
    /// any trial.
    pub(super) fn check_command(
        &self,
        p: &Program,
        params: &[(String, Param)],
    ) -> anyhow::Result<()> {
        let values: BTreeMap<String, ParamValue> = params
            .iter()
            .map(|(k, p)| {
                let v = match p {
                    Param::Fixed(v) => v.clone(),
                    Param::Sampled(d) => first_value(d),
                };
                (k.clone(), v)
            })
            .collect();
        let json = to_json(params, &values);
        let no_env = |_: &str| None;
        supervise::command::expand(
            p.command.as_deref(),
            &supervise::command::Context {
                params: &json,
                program: &p.file,
                interpreter: "python",
                args_json_file: "args.json",
                config: Some("config.yaml"),
                env: &no_env,
            },
        )
        .map(|_| ())
        .map_err(|e| self.err("command", format!("{e:#}")))
    }
}

fn first_value(d: &Distribution) -> ParamValue {
    match d {
        Distribution::Float { low, .. } => ParamValue::Float(*low),
        Distribution::Int { low, .. } => ParamValue::Int(*low),
        Distribution::Categorical { choices } => {
            ParamValue::Choice(choices.first().cloned().unwrap_or(Choice::Null))
        }
    }
}

/// Each parameter's value in the space's order (as W&B's agent gives them),
/// as JSON.
fn to_json(
    params: &[(String, Param)],
    values: &BTreeMap<String, ParamValue>,
) -> Vec<(String, Json)> {
    params
        .iter()
        .filter_map(|(k, p)| {
            let v = values.get(k).cloned().or_else(|| match p {
                Param::Fixed(v) => Some(v.clone()),
                Param::Sampled(_) => None,
            })?;
            Some((k.clone(), v.to_json()))
        })
        .collect()
}

impl Space {
    /// A trial's parameters as its program gets them: every parameter (the
    /// fixed ones too) in the space's order.
    pub fn program_params(&self, values: &BTreeMap<String, ParamValue>) -> Vec<(String, Json)> {
        to_json(&self.params, values)
    }

    /// The `${config}` file of a trial: `base_text` (the file `--config`
    /// names, `base_name` in messages) with each parameter set at its dotted
    /// key, comments and order kept; a key the file lacks is added.
    pub fn trial_config_text(
        base_text: &str,
        base_name: &str,
        values: &BTreeMap<String, ParamValue>,
    ) -> anyhow::Result<String> {
        let mut text = base_text.to_string();
        for (key, v) in values {
            let yaml = serde_yaml::to_string(&v.to_yaml()).unwrap_or_default();
            text = diagnose::yaml_edit::set(&text, key, yaml.trim()).map_err(|e| {
                bad_input!("{base_name}: cannot set `{key}` for the trial's ${{config}}: {e}")
            })?;
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Space> {
        let input = Input {
            name: "space.yaml".into(),
            text: text.into(),
        };
        Space::parse(&input, &Config::default()).map(|p| p.space)
    }

    const PROGRAM: &str =
        "program: main.py\nmethod: grid\nmetric: {name: loss}\nparameters: {lr: {value: 1}}\n";

    #[test]
    fn preload_names_modules_once_each_in_order() {
        let s = parse(&format!(
            "{PROGRAM}preload: [torch, transformers.trainer, torch]\n"
        ))
        .unwrap();
        let preload = s.program.unwrap().preload;
        assert_eq!(preload, ["torch", "transformers.trainer"]);
        assert!(parse(PROGRAM).unwrap().program.unwrap().preload.is_empty());
    }

    #[test]
    fn auto_fix_with_its_names_and_attempts() {
        let s = parse(&format!(
            "{PROGRAM}auto_fix: true\nfix: {{batch: bsz, accumulation: accum}}\nmax_attempts: 3\n"
        ))
        .unwrap();
        let a = s.program.unwrap().auto_fix.unwrap();
        use diagnose::knobs::Knob;
        assert_eq!(
            a.knobs,
            [
                (Knob::Batch, "bsz".to_string()),
                (Knob::Accumulation, "accum".to_string())
            ]
        );
        assert_eq!(a.max_attempts, 3);
        let s = parse(&format!("{PROGRAM}auto_fix: true\n")).unwrap();
        assert_eq!(
            s.program.unwrap().auto_fix.unwrap().max_attempts,
            diagnose::ladder::MAX_ATTEMPTS
        );
        assert!(parse(PROGRAM).unwrap().program.unwrap().auto_fix.is_none());
        let refused = |text: &str| format!("{:#}", parse(text).expect_err("refused"));
        let m = refused(&format!("{PROGRAM}fix: {{batch: bsz}}\n"));
        assert!(m.contains("`fix`: only with `auto_fix: true`"), "{m}");
        let m = refused(&format!("{PROGRAM}auto_fix: true\nfix: {{bsz: batch}}\n"));
        assert!(
            m.contains("`fix.bsz`: unknown knob \"bsz\"; expected one of batch"),
            "{m}"
        );
        let m = refused(&format!("{PROGRAM}auto_fix: yes please\n"));
        assert!(m.contains("`auto_fix`: expected true or false"), "{m}");
        let m = refused(&format!("{PROGRAM}auto_fix: true\nmax_attempts: 0\n"));
        assert!(m.contains("from 1 to 100"), "{m}");
        let m = refused("method: grid\nmetric: {name: val_loss}\nparameters: {lr: {value: 0.1}}\nauto_fix: true\n");
        assert!(
            m.contains("`auto_fix`: only for a space that names `program`"),
            "{m}"
        );
    }

    #[test]
    fn ranks_per_trial_is_a_whole_number_from_one_beside_a_program() {
        let s = parse(&format!("{PROGRAM}ranks_per_trial: 2\n")).unwrap();
        assert_eq!(s.program.unwrap().ranks_per_trial, Some(2));
        assert_eq!(
            parse(PROGRAM).unwrap().program.unwrap().ranks_per_trial,
            None
        );
        let refused = |text: &str| format!("{:#}", parse(text).expect_err("refused"));
        for bad in ["0", "two", "1.5"] {
            let m = refused(&format!("{PROGRAM}ranks_per_trial: {bad}\n"));
            assert!(
                m.contains("`ranks_per_trial`: expected the number of ranks"),
                "{m}"
            );
        }
        let m = refused("method: grid\nmetric: {name: loss}\nparameters: {lr: {value: 1}}\nranks_per_trial: 2\n");
        assert!(m.contains("only for a space that names `program`"), "{m}");
    }

    #[test]
    fn a_bad_preload_is_refused_with_its_line() {
        let refused = |text: &str| {
            let e = parse(text).expect_err("refused");
            let code = e.downcast_ref::<common::exit::Failure>().map(|f| f.code);
            assert_eq!(code, Some(common::exit::BAD_INPUT), "{e:#}");
            format!("{e:#}")
        };
        let m = refused(&format!("{PROGRAM}preload: torch\n"));
        assert!(
            m.starts_with("space.yaml: line 5: `preload`: expected a list of modules to import once for all trials, e.g. [torch, transformers.trainer], found torch"),
            "{m}"
        );
        let m = refused(&format!(
            "{PROGRAM}preload:\n  - torch\n  - transformers-trainer\n"
        ));
        assert!(
            m.starts_with("space.yaml: line 7: `preload[1]`: expected a module name as Python imports it (e.g. torch or transformers.trainer), found \"transformers-trainer\""),
            "{m}"
        );
        let m = refused(&format!("{PROGRAM}preload: [torch, {{a: 1}}]\n"));
        assert!(
            m.contains("`preload[1]`: expected a module name (e.g. torch), found a: 1"),
            "{m}"
        );
        let m = refused("method: grid\nmetric: {name: val_loss}\nparameters: {lr: {value: 0.1}}\npreload: [torch]\n");
        assert!(
            m.starts_with("space.yaml: line 4: `preload`: only for a space that names `program`"),
            "{m}"
        );
    }

    #[test]
    fn a_trial_config_keeps_the_comments_and_sets_dotted_keys() {
        let base =
            "# the seeds' config\nepochs: 50  # long\noptimizer:\n  lr: 0.001\n  name: adamw\n";
        let values = BTreeMap::from([
            ("optimizer.lr".to_string(), ParamValue::Float(0.01)),
            ("epochs".to_string(), ParamValue::Int(3)),
            ("optimizer.warmup".to_string(), ParamValue::Int(100)),
            (
                "tag".to_string(),
                ParamValue::Choice(Choice::Str("a: b".into())),
            ),
        ]);
        let text = Space::trial_config_text(base, "base.yaml", &values).unwrap();
        assert!(
            text.starts_with("# the seeds' config\nepochs: 3  # long\n"),
            "{text}"
        );
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(doc["optimizer"]["lr"].as_f64(), Some(0.01));
        assert_eq!(doc["optimizer"]["warmup"].as_i64(), Some(100));
        assert_eq!(doc["optimizer"]["name"].as_str(), Some("adamw"));
        assert_eq!(doc["tag"].as_str(), Some("a: b"));
    }
}
