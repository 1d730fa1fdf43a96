//! One parameter's block (values, a distribution and its range), the
//! metric block and early_terminate, each read into its typed form with the
//! line of anything refused.

use super::*;

impl Reader<'_> {
    pub(super) fn param(&self, m: &Mapping, path: &str) -> anyhow::Result<Param> {
        let entries = self.entries(m, path)?;
        self.check_param_keys(&entries, path)?;
        let dist = self.named_or_inferred(m, path)?;
        self.check_supported(m, path, dist)?;
        self.check_uses(&entries, m, path, dist)?;
        match dist {
            "categorical" => self.categorical(m, path),
            "constant" => self.constant(m, path),
            _ => self.range(m, path, dist),
        }
    }

    /// A parameter's keys, with why W&B's weighted and normal/beta forms
    /// are refused.
    fn check_param_keys(&self, entries: &[(String, &Value)], path: &str) -> anyhow::Result<()> {
        for (k, _) in entries {
            match k.as_str() {
                k if PARAM_KEYS.contains(&k) => {}
                "probabilities" => {
                    return Err(self.err(
                        &child(path, k),
                        "weighted categories are not supported (Optuna's categorical distribution has no weights); list a value more than once, or drop `probabilities`",
                    ))
                }
                "mu" | "sigma" | "a" | "b" => {
                    return Err(self.err(
                        &child(path, k),
                        "normal and beta distributions are not supported; use uniform, int_uniform, log_uniform_values, q_uniform or values",
                    ))
                }
                k => return Err(self.unknown(&child(path, k), k, &PARAM_KEYS)),
            }
        }
        Ok(())
    }

    /// The distribution named, or the one W&B infers from the keys when
    /// none is.
    fn named_or_inferred<'m>(&self, m: &'m Mapping, path: &str) -> anyhow::Result<&'m str> {
        let get = |key: &str| m.get(key);
        let dist = match get("distribution") {
            None => None,
            Some(v) => Some(v.as_str().ok_or_else(|| {
                self.err(
                    &child(path, "distribution"),
                    format!(
                        "expected one of {}, found {}",
                        DISTRIBUTIONS.join(", "),
                        show(v)
                    ),
                )
            })?),
        };
        let has = |k: &str| m.contains_key(k);
        // W&B's inference when no distribution is named.
        Ok(match dist {
            Some(d) => d,
            None if has("values") => "categorical",
            None if has("value") => "constant",
            None if has("min") && has("max") => {
                match (get("min").and_then(number), get("max").and_then(number)) {
                    (Some(Num::Int(_)), Some(Num::Int(_))) => "int_uniform",
                    _ => "uniform",
                }
            }
            None if has("min") || has("max") => {
                let missing = if has("min") { "max" } else { "min" };
                return Err(self.err(
                    path,
                    format!("`{missing}` is missing: a range needs both min and max"),
                ));
            }
            None => return Err(self.err(path, "expected values: [...], value: x, or min and max")),
        })
    }

    /// Refuses W&B's old log_uniform, the distributions Optuna has no
    /// equivalent of, and unknown names (with the nearest).
    fn check_supported(&self, m: &Mapping, path: &str, dist: &str) -> anyhow::Result<()> {
        let dist_path = child(path, "distribution");
        if dist == "log_uniform" {
            let hint = match (m.get("min").and_then(number), m.get("max").and_then(number)) {
                (Some(a), Some(b)) => format!(
                    " (min: {a}, max: {b} here mean min: {:.3e}, max: {:.3e})",
                    a.f64().exp(),
                    b.f64().exp(),
                    a = a.f64(),
                    b = b.f64()
                ),
                _ => String::new(),
            };
            return Err(self.err(
                &dist_path,
                format!(
                    "log_uniform is W&B's old form whose min and max are exponents (values from e^min to e^max), easy to misread as the values themselves; write `distribution: log_uniform_values` with the values{hint}"
                ),
            ));
        }
        if UNSUPPORTED_DISTRIBUTIONS.contains(&dist) || dist == "categorical_w_probabilities" {
            return Err(self.err(
                &dist_path,
                format!(
                    "{dist} is not supported (Optuna's samplers have no equivalent); use one of {}",
                    DISTRIBUTIONS.join(", ")
                ),
            ));
        }
        if !DISTRIBUTIONS.contains(&dist) {
            let mut all: Vec<&str> = DISTRIBUTIONS.to_vec();
            all.extend(UNSUPPORTED_DISTRIBUTIONS);
            all.push("log_uniform");
            let near = nearest_key(dist, &all)
                .map(|k| format!("did you mean {k}? "))
                .unwrap_or_default();
            return Err(self.err(
                &dist_path,
                format!(
                    "unknown distribution `{dist}`; {near}expected one of {}",
                    DISTRIBUTIONS.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Keys the chosen distribution does not use are refused, not ignored
    /// (`values` next to `min` is ambiguous); those it needs must be there.
    fn check_uses(
        &self,
        entries: &[(String, &Value)],
        m: &Mapping,
        path: &str,
        dist: &str,
    ) -> anyhow::Result<()> {
        let uses: &[&str] = match dist {
            "categorical" => &["values"],
            "constant" => &["value"],
            "q_uniform" => &["min", "max", "q"],
            _ => &["min", "max"],
        };
        for (k, _) in entries {
            if k != "distribution" && !uses.contains(&k.as_str()) {
                return Err(self.err(
                    &child(path, k),
                    format!(
                        "not used by distribution {dist} (it takes {})",
                        uses.join(", ")
                    ),
                ));
            }
        }
        for k in uses {
            if !m.contains_key(*k) {
                let why = if *k == "q" {
                    " (W&B would default q to 1; write q: 1 if that is meant)"
                } else {
                    ""
                };
                return Err(self.err(path, format!("distribution {dist} needs `{k}`{why}")));
            }
        }
        Ok(())
    }

    fn categorical(&self, m: &Mapping, path: &str) -> anyhow::Result<Param> {
        let vpath = child(path, "values");
        let list = match m.get("values").and_then(Value::as_sequence) {
            Some(l) if !l.is_empty() => l,
            _ => return Err(self.err(&vpath, "expected a non-empty list of values")),
        };
        let choices = list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                scalar(v).ok_or_else(|| {
                    self.err(
                        &format!("{vpath}[{i}]"),
                        format!("expected a number, string, boolean or null, found {} (categorical choices are scalars, as in Optuna)", show(v)),
                    )
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Param::Sampled(Distribution::Categorical { choices }))
    }

    fn constant(&self, m: &Mapping, path: &str) -> anyhow::Result<Param> {
        let v = &m["value"];
        let c = scalar(v).ok_or_else(|| {
            self.err(
                &child(path, "value"),
                format!("expected a number, string, boolean or null, found {}; set lists and mappings in the base config", show(v)),
            )
        })?;
        Ok(Param::Fixed(fixed_value(c)))
    }

    pub(super) fn range(&self, m: &Mapping, path: &str, dist: &str) -> anyhow::Result<Param> {
        let (min, max) = (self.finite(m, path, "min")?, self.finite(m, path, "max")?);
        if min.f64() > max.f64() {
            return Err(self.err(
                &child(path, "min"),
                format!("min ({}) is greater than max ({})", min.f64(), max.f64()),
            ));
        }
        match dist {
            "int_uniform" => {
                let (low, high) = ints(min, max).ok_or_else(|| {
                    self.err(
                        path,
                        format!(
                            "int_uniform needs integer min and max, found {} and {}",
                            min.f64(),
                            max.f64()
                        ),
                    )
                })?;
                Ok(Param::Sampled(Distribution::Int {
                    low,
                    high,
                    log: false,
                    step: 1,
                }))
            }
            "uniform" => Ok(float(min, max, false, None)),
            "log_uniform_values" => {
                if min.f64() <= 0.0 {
                    return Err(self.err(
                        &child(path, "min"),
                        format!("log_uniform_values needs min > 0, found {}", min.f64()),
                    ));
                }
                // Integer bounds stay integers, as int_uniform's do, so that
                // an integer key (batch_size) gets integers.
                Ok(match ints(min, max) {
                    Some((low, high)) => Param::Sampled(Distribution::Int {
                        low,
                        high,
                        log: true,
                        step: 1,
                    }),
                    None => float(min, max, true, None),
                })
            }
            _ => self.q_uniform(m, path, min, max),
        }
    }

    /// q_uniform: Optuna's grid low + k·q; the range must hold a whole
    /// number of steps (Optuna would lower max silently).
    fn q_uniform(&self, m: &Mapping, path: &str, min: Num, max: Num) -> anyhow::Result<Param> {
        let q = self.finite(m, path, "q")?;
        if q.f64() <= 0.0 {
            return Err(self.err(
                &child(path, "q"),
                format!("expected q > 0, found {}", q.f64()),
            ));
        }
        let steps = (max.f64() - min.f64()) / q.f64();
        if (steps - steps.round()).abs() > 1e-9 * steps.abs().max(1.0) {
            let fit = min.f64() + steps.floor() * q.f64();
            return Err(self.err(
                &child(path, "max"),
                format!(
                    "max - min ({}) is not a multiple of q ({}); use max: {fit}",
                    max.f64() - min.f64(),
                    q.f64()
                ),
            ));
        }
        Ok(match (ints(min, max), q) {
            (Some((low, high)), Num::Int(step)) => Param::Sampled(Distribution::Int {
                low,
                high,
                log: false,
                step,
            }),
            _ => float(min, max, false, Some(q.f64())),
        })
    }

    /// A range's bound or step `key`, a finite number.
    fn finite(&self, m: &Mapping, path: &str, key: &str) -> anyhow::Result<Num> {
        let v = &m[key];
        match number(v) {
            Some(n) if n.f64().is_finite() => Ok(n),
            _ => Err(self.err(
                &child(path, key),
                format!("expected a finite number, found {}", show(v)),
            )),
        }
    }

    pub(super) fn metric(
        &mut self,
        v: Option<&Value>,
        base: &Config,
        params: &[(String, Param)],
        program: bool,
    ) -> anyhow::Result<Metric> {
        let Some(v) = v else {
            self.warn("", "no `metric`: trials are ranked by val_loss (minimize)");
            return Ok(Metric {
                name: MetricName::ValLoss,
                goal: Direction::Minimize,
                regex: None,
                summary_last: false,
            });
        };
        let Some(m) = v.as_mapping() else {
            return Err(self.err(
                "metric",
                format!(
                    "expected {{name: val_loss, goal: minimize}}, found {}",
                    show(v)
                ),
            ));
        };
        self.check_metric_keys(m, program)?;
        if program {
            return self.program_metric(m);
        }
        let name = self.train_metric_name(m)?;
        self.check_metric_for_task(&name, base, params)?;
        let goal = self.metric_goal(m)?;
        Ok(Metric {
            name,
            goal,
            regex: None,
            summary_last: false,
        })
    }

    /// The metric block's keys: W&B's others are warned about, a program's
    /// own (regex, summary) refused for train's trials.
    fn check_metric_keys(&mut self, m: &Mapping, program: bool) -> anyhow::Result<()> {
        let known = [
            "name",
            "goal",
            "regex",
            "summary",
            "target",
            "impute",
            "impute_while_running",
        ];
        for (k, _) in self.entries(m, "metric")? {
            if !known.contains(&k.as_str()) {
                return Err(self.unknown(&child("metric", &k), &k, &known));
            }
            if ["regex", "summary"].contains(&k.as_str()) && !program {
                return Err(self.err(
                    &child("metric", &k),
                    "only for a space that names `program` (train's own metrics are its metrics.csv columns)",
                ));
            }
            if !["name", "goal", "regex", "summary"].contains(&k.as_str()) {
                self.warn(&child("metric", &k), "ignored: not used by train sweep");
            }
        }
        Ok(())
    }

    /// Train's metric: one of its metrics.csv columns.
    fn train_metric_name(&self, m: &Mapping) -> anyhow::Result<MetricName> {
        let known = MetricName::known_names();
        let name = match m.get("name") {
            None => {
                return Err(self.err(
                    "metric",
                    format!("missing `name`: expected one of {}", known.join(", ")),
                ))
            }
            Some(n) => MetricName::from_name(n.as_str().unwrap_or_default()),
        };
        if !name.is_known() {
            let near = nearest_key(name.as_str(), &known)
                .map(|k| format!("did you mean `{k}`? "))
                .unwrap_or_default();
            return Err(self.err(
                "metric.name",
                format!(
                    "`{}` is not a column of train's {}; {near}expected one of {}",
                    show(&m["name"]),
                    run_dir::METRICS,
                    known.join(", ")
                ),
            ));
        }
        Ok(name)
    }

    /// A column train leaves empty for the task would rank nothing.
    fn check_metric_for_task(
        &self,
        name: &MetricName,
        base: &Config,
        params: &[(String, Param)],
    ) -> anyhow::Result<()> {
        if params.iter().any(|(k, _)| k == "task") {
            return Ok(());
        }
        use common::config::Task;
        let (task, wrong, right) = match base.task {
            Task::Regression => (
                "regression",
                [MetricName::Accuracy, MetricName::MacroF1].as_slice(),
                "val_loss, train_loss, mae, rmse or r2",
            ),
            Task::Classification => (
                "classification",
                [MetricName::Mae, MetricName::Rmse, MetricName::R2].as_slice(),
                "val_loss, train_loss, accuracy or macro_f1",
            ),
        };
        if wrong.contains(name) {
            return Err(self.err(
                "metric.name",
                format!(
                    "{name} is empty in {} for task {task} (the base config's); use {right}",
                    run_dir::METRICS
                ),
            ));
        }
        Ok(())
    }

    /// The metric's goal, minimize unless it says maximize.
    fn metric_goal(&self, m: &Mapping) -> anyhow::Result<Direction> {
        match m.get("goal") {
            None => Ok(Direction::Minimize),
            Some(g) => match g.as_str() {
                Some("minimize") => Ok(Direction::Minimize),
                Some("maximize") => Ok(Direction::Maximize),
                _ => Err(self.err(
                    "metric.goal",
                    format!("expected minimize or maximize, found {}", show(g)),
                )),
            },
        }
    }

    /// A program's metric: any name it reports, its goal, `regex` (one
    /// capture group) and `summary: best|last`.
    fn program_metric(&mut self, m: &serde_yaml::Mapping) -> anyhow::Result<Metric> {
        let name = match m.get("name").and_then(Value::as_str) {
            Some(n) if !n.trim().is_empty() => n.to_string(),
            _ => {
                return Err(self.err(
                    "metric",
                    "missing `name`: the metric your program reports (val_loss, eval/loss, accuracy, ...)",
                ))
            }
        };
        let goal = self.metric_goal(m)?;
        let regex = match m.get("regex") {
            None => None,
            Some(Value::String(r)) => {
                supervise::readers::Reader::new(&name, Some(r))
                    .map_err(|e| self.err("metric.regex", format!("{e:#}")))?;
                Some(r.clone())
            }
            Some(v) => {
                return Err(self.err(
                    "metric.regex",
                    format!(
                        "expected a regular expression (a string), found {}",
                        show(v)
                    ),
                ))
            }
        };
        let summary_last = match m.get("summary").map(|v| (v, v.as_str())) {
            None | Some((_, Some("best"))) => false,
            Some((_, Some("last"))) => true,
            Some((v, _)) => {
                return Err(self.err(
                    "metric.summary",
                    format!(
                        "expected best (the default) or last (W&B's summary), found {}",
                        show(v)
                    ),
                ))
            }
        };
        Ok(Metric {
            name: MetricName::from_name(&name),
            goal,
            regex,
            summary_last,
        })
    }

    pub(super) fn hyperband(&mut self, v: &Value) -> anyhow::Result<Hyperband> {
        let path = "early_terminate";
        let m = self.hyperband_mapping(v)?;
        let uint = |k: &str| -> anyhow::Result<Option<u64>> {
            match m.get(k) {
                None => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    self.err(
                        &child(path, k),
                        format!("expected a non-negative integer, found {}", show(v)),
                    )
                }),
            }
        };
        let eta = match m.get("eta") {
            None => 3.0,
            Some(v) => v.as_f64().ok_or_else(|| {
                self.err(
                    &child(path, "eta"),
                    format!("expected a number > 1, found {}", show(v)),
                )
            })?,
        };
        let strict = match m.get("strict") {
            None => true,
            Some(v) => v.as_bool().ok_or_else(|| {
                self.err(
                    &child(path, "strict"),
                    format!("expected true or false, found {}", show(v)),
                )
            })?,
        };
        let (min_iter, max_iter, s) = (uint("min_iter")?, uint("max_iter")?, uint("s")?);
        let made = match (max_iter, s, min_iter) {
            (Some(max_iter), Some(s), min) => {
                if min.is_some() {
                    self.warn(
                        &child(path, "min_iter"),
                        "ignored: max_iter and s set the bands (as in W&B)",
                    );
                }
                Hyperband::from_max_iter(max_iter, s, eta, strict)
            }
            (Some(_), None, _) => {
                return Err(self.err(
                    &child(path, "max_iter"),
                    "max_iter needs s (how many bands below max_iter)",
                ))
            }
            (None, _, Some(min_iter)) => Hyperband::from_min_iter(min_iter, eta, strict),
            (None, _, None) => {
                return Err(self.err(path, "needs min_iter (the first band), or max_iter and s"))
            }
        };
        made.map_err(|e| self.err(path, e))
    }

    /// early_terminate as a mapping of known keys whose type is hyperband.
    fn hyperband_mapping<'v>(&self, v: &'v Value) -> anyhow::Result<&'v Mapping> {
        let path = "early_terminate";
        let Some(m) = v.as_mapping() else {
            return Err(self.err(
                path,
                format!(
                    "expected {{type: hyperband, min_iter: N}}, found {}",
                    show(v)
                ),
            ));
        };
        let known = ["type", "min_iter", "max_iter", "s", "eta", "strict"];
        for (k, _) in self.entries(m, path)? {
            if !known.contains(&k.as_str()) {
                return Err(self.unknown(&child(path, &k), &k, &known));
            }
        }
        match m.get("type").and_then(Value::as_str) {
            Some("hyperband") => Ok(m),
            _ => Err(self.err(
                &child(path, "type"),
                format!(
                    "expected hyperband (the only early termination W&B defines), found {}",
                    m.get("type").map(show).unwrap_or_else(|| "nothing".into())
                ),
            )),
        }
    }
}

/// Both bounds as integers, when both were written as integers.
fn ints(min: Num, max: Num) -> Option<(i64, i64)> {
    match (min, max) {
        (Num::Int(a), Num::Int(b)) => Some((a, b)),
        _ => None,
    }
}

fn float(min: Num, max: Num, log: bool, step: Option<f64>) -> Param {
    Param::Sampled(Distribution::Float {
        low: min.f64(),
        high: max.f64(),
        log,
        step,
    })
}
