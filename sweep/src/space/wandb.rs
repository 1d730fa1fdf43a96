//! Reading a W&B sweep document (or the older space/v1) into a `Space`,
//! and checking it against the config schema; each parameter's own block
//! is read in `params`.

use super::program::ProgramKeys;
use super::*;

impl Reader<'_> {
    pub(super) fn wandb(
        &mut self,
        entries: &[(String, &Value)],
        base: &Config,
    ) -> anyhow::Result<Space> {
        let mut known: Vec<&str> = TOP_KEYS.to_vec();
        known.extend(IGNORED_KEYS);
        for (k, _) in entries {
            if !known.contains(&k.as_str()) {
                return Err(self.unknown(k, k, &known));
            }
        }
        let get = |key: &str| entries.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
        let program = self.program(&ProgramKeys::of(&get))?;

        let method = match get("method") {
            None => {
                return Err(bad_input!(
                    "{}: missing `method`: expected grid, random or bayes",
                    self.name
                ))
            }
            Some(v) => match v.as_str().map(Method::parse) {
                Some(Ok(m)) => m,
                _ => {
                    return Err(self.err(
                        "method",
                        format!("expected grid, random or bayes, found {}", show(v)),
                    ))
                }
            },
        };
        let method = self.bayes(get("bayes"), method)?;
        let params = match get("parameters") {
            None => {
                return Err(bad_input!(
                    "{}: missing `parameters`: expected a mapping of config keys to {{values: [...]}}, {{value: x}} or {{min: a, max: b}}",
                    self.name
                ))
            }
            Some(v) => {
                let mut params = Vec::new();
                self.parameters(v, "parameters", "", &mut params)?;
                params
            }
        };
        let metric = self.metric(get("metric"), base, &params, program.is_some())?;
        if let Some(p) = &program {
            self.check_command(p, &params)?;
        }
        let run_cap = match get("run_cap") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) if n > 0 => Some(n),
                _ => {
                    return Err(self.err(
                        "run_cap",
                        format!("expected a positive integer, found {}", show(v)),
                    ))
                }
            },
        };
        let early_terminate = match get("early_terminate") {
            None => None,
            Some(v) => Some(self.hyperband(v)?),
        };
        let memory_model = self.memory_model(get("memory_model"))?;
        Ok(Space {
            method,
            metric,
            params,
            run_cap,
            early_terminate,
            program,
            memory_model,
        })
    }

    /// trainguard's `memory_model: true|false` (true when absent).
    fn memory_model(&self, v: Option<&Value>) -> anyhow::Result<bool> {
        match v {
            None => Ok(true),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.err(
                "memory_model",
                format!(
                    "expected true (predict each point's peak, and refuse a point predicted not to fit) or false (run every point), found {}",
                    show(v)
                ),
            )),
        }
    }

    /// trainguard's `bayes: {variant: multivariate|univariate}`: which TPE
    /// `method: bayes` runs (absent: the method's default, multivariate).
    fn bayes(&self, v: Option<&Value>, method: Method) -> anyhow::Result<Method> {
        let Some(v) = v else {
            return Ok(method);
        };
        let expected = "expected {variant: multivariate} (Optuna 5's default TPE: all parameters jointly, running trials avoided) or {variant: univariate} (Optuna 4's: each parameter on its own)";
        if !matches!(method, Method::Bayes(_)) {
            return Err(self.err(
                "bayes",
                format!(
                    "applies to `method: bayes` only, and this space's method is {}; drop `bayes` or write `method: bayes`",
                    method.as_str()
                ),
            ));
        }
        let Some(m) = v.as_mapping() else {
            return Err(self.err("bayes", format!("{expected}, found {}", show(v))));
        };
        for (k, _) in self.entries(m, "bayes")? {
            if k != "variant" {
                return Err(self.unknown(&child("bayes", &k), &k, &["variant"]));
            }
        }
        let Some(variant) = m.get("variant") else {
            return Err(self.err("bayes", format!("`variant` is missing: {expected}")));
        };
        match variant.as_str().and_then(crate::sampler::TpeVariant::parse) {
            Some(t) => Ok(Method::Bayes(t)),
            None => Err(self.err(
                "bayes.variant",
                format!(
                    "expected {}, found {}",
                    crate::sampler::TpeVariant::NAMES.join(" or "),
                    show(variant)
                ),
            )),
        }
    }

    /// `parameters:` and W&B's nested `parameters:` inside a parameter,
    /// flattened to dotted config keys.
    pub(super) fn parameters(
        &mut self,
        v: &Value,
        path: &str,
        prefix: &str,
        out: &mut Vec<(String, Param)>,
    ) -> anyhow::Result<()> {
        let map = match v.as_mapping() {
            Some(m) if !m.is_empty() => m,
            _ => {
                return Err(self.err(
                    path,
                    "expected at least one parameter: a config key mapped to {values: [...]}, {value: x} or {min: a, max: b}",
                ))
            }
        };
        for (key, spec) in self.entries(map, path)? {
            let ypath = child(path, &key);
            let valid = key
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            if !valid {
                return Err(self.err(
                    &ypath,
                    "expected a config key (letters, digits, _ and . for nested keys)",
                ));
            }
            let config_key = child(prefix, &key);
            match spec.as_mapping() {
                Some(m) if m.contains_key("parameters") => {
                    if m.len() > 1 {
                        return Err(self.err(
                            &ypath,
                            "a nested `parameters:` takes no other keys",
                        ));
                    }
                    self.parameters(&m["parameters"], &child(&ypath, "parameters"), &config_key, out)?;
                }
                Some(m) => {
                    let param = self.param(m, &ypath)?;
                    if out.iter().any(|(k, _)| *k == config_key) {
                        return Err(self.err(
                            &ypath,
                            format!("`{config_key}` is given twice"),
                        ));
                    }
                    out.push((config_key, param));
                }
                None if spec.is_sequence() => {
                    return Err(self.err(
                        &ypath,
                        "a bare list is the deprecated space/v1 form; write {values: [...]} (or add `schema: space/v1`)",
                    ))
                }
                None => {
                    return Err(self.err(
                        &ypath,
                        format!(
                            "expected {{values: [...]}}, {{value: x}} or {{min: a, max: b}}, found {}; for a fixed value write {{value: {}}}",
                            show(spec),
                            show(spec)
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    pub(super) fn legacy(&mut self, entries: &[(String, &Value)]) -> anyhow::Result<Space> {
        for (k, _) in entries {
            if k != "schema" && k != "parameters" {
                return Err(self.err(
                    k,
                    "space/v1 has only `schema` and `parameters`; for method, metric and the rest drop `schema` and write W&B sweep YAML",
                ));
            }
        }
        self.warn(
            "schema",
            "space/v1 is deprecated: drop `schema`, add `method: grid` and `metric: {name: val_loss, goal: minimize}`, and write each parameter as `key: {values: [...]}` (W&B sweep YAML)",
        );
        let Some(map) = entries
            .iter()
            .find(|(k, _)| k == "parameters")
            .and_then(|(_, v)| v.as_mapping())
            .filter(|m| !m.is_empty())
        else {
            return Err(self.err(
                "parameters",
                "expected a mapping of config keys to lists of values",
            ));
        };
        let mut params = Vec::new();
        for (key, v) in self.entries(map, "parameters")? {
            let path = child("parameters", &key);
            let list = v
                .as_sequence()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| self.err(&path, "expected a non-empty list of values"))?;
            let choices = list
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    scalar(v).ok_or_else(|| {
                        self.err(
                            &format!("{path}[{i}]"),
                            format!("expected a number, string, boolean or null, found {} (choices are scalars, as in Optuna)", show(v)),
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            params.push((key, Param::Sampled(Distribution::Categorical { choices })));
        }
        Ok(Space {
            method: Method::Grid,
            metric: Metric {
                name: MetricName::ValLoss,
                goal: Direction::Minimize,
                regex: None,
                summary_last: false,
            },
            params,
            run_cap: None,
            early_terminate: None,
            program: None,
            memory_model: true,
        })
    }

    /// Where a parameter stands in the file: its dotted key under
    /// `parameters`, or its nested W&B form.
    pub(super) fn param_path(&self, key: &str) -> String {
        let flat = child("parameters", key);
        if self.index.nodes.contains_key(&flat) {
            return flat;
        }
        let nested = format!(
            "parameters.{}",
            key.split('.').collect::<Vec<_>>().join(".parameters.")
        );
        if self.index.nodes.contains_key(&nested) {
            nested
        } else {
            flat
        }
    }

    /// Each key a config key; each end value accepted by the schema when set
    /// alone (with the fixed parameters) into `base`.
    pub(super) fn check_against(&self, space: &Space, base: &Config) -> anyhow::Result<()> {
        self.check_keys(space)?;
        let mut doc = serde_yaml::to_value(base)?;
        for (key, param) in &space.params {
            if let Param::Fixed(v) = param {
                // Checked below like the others; set here so the sampled
                // ones are judged with them.
                let _ = set_path(&mut doc, key, v.to_yaml());
            }
        }
        let mut problems = Vec::new();
        for (key, param) in &space.params {
            let path = self.param_path(key);
            let values_path = match self.index.nodes.contains_key(&child(&path, "values")) {
                true => child(&path, "values"),
                // space/v1 lists the values right under the key.
                false => path.clone(),
            };
            for (end, value) in ends(param, &path, &values_path) {
                let mut trial = doc.clone();
                let yaml = value.to_yaml();
                if let Err(e) = set_path(&mut trial, key, yaml.clone()) {
                    problems.push(self.at(&end, e));
                    continue;
                }
                let refused = match serde_yaml::from_value::<Config>(trial) {
                    Err(e) => Some(e.to_string()),
                    Ok(c) => {
                        let p = c.validate();
                        (!p.is_empty()).then(|| {
                            p.iter()
                                .map(|(k, m)| format!("`{k}`: {m}"))
                                .collect::<Vec<_>>()
                                .join("; ")
                        })
                    }
                };
                if let Some(why) = refused {
                    problems.push(self.at(
                        &end,
                        format!(
                            "{key} = {} is refused by the config schema: {why}",
                            show(&yaml)
                        ),
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(bad_input!("{}", problems.join("\n")))
        }
    }

    /// Each parameter a config key, or an entry of a map key; else what the
    /// user most likely meant.
    fn check_keys(&self, space: &Space) -> anyhow::Result<()> {
        let keys = config_keys();
        let known: Vec<&str> = keys.iter().map(String::as_str).collect();
        for (key, _) in &space.params {
            let path = self.param_path(key);
            let free = key
                .rsplit_once('.')
                .is_some_and(|(parent, _)| MAP_KEYS.contains(&parent));
            if free || known.contains(&key.as_str()) {
                continue;
            }
            let below: Vec<&str> = known
                .iter()
                .copied()
                .filter(|k| k.starts_with(&format!("{key}.")))
                .collect();
            let msg = if !below.is_empty() {
                format!(
                    "`{key}` is a section of the config; name one of its keys: {}",
                    below.join(", ")
                )
            } else if MAP_KEYS.contains(&key.as_str()) {
                format!(
                    "`{key}` is a map; name one of its entries, such as `{key}.PYTORCH_ALLOC_CONF`"
                )
            } else {
                match nearest_key(key, &known) {
                    Some(k) => format!("`{key}` is not a config key; did you mean `{k}`?"),
                    None => format!(
                        "`{key}` is not a config key (see docs/guide/config.md, \"Config\")"
                    ),
                }
            };
            return Err(self.err(&path, msg));
        }
        Ok(())
    }
}

/// The values a parameter can take at its ends, with the file path of each
/// (`values_path`: where a categorical's list stands).
pub(super) fn ends(param: &Param, path: &str, values_path: &str) -> Vec<(String, ParamValue)> {
    match param {
        Param::Fixed(v) => vec![(child(path, "value"), v.clone())],
        Param::Sampled(Distribution::Float { low, high, .. }) => vec![
            (child(path, "min"), ParamValue::Float(*low)),
            (child(path, "max"), ParamValue::Float(*high)),
        ],
        Param::Sampled(Distribution::Int { low, high, .. }) => vec![
            (child(path, "min"), ParamValue::Int(*low)),
            (child(path, "max"), ParamValue::Int(*high)),
        ],
        Param::Sampled(Distribution::Categorical { choices }) => choices
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("{values_path}[{i}]"), ParamValue::Choice(c.clone())))
            .collect(),
    }
}
