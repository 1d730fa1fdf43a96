use super::*;
use common::exit::{Failure, BAD_INPUT};

fn parse_with(text: &str, base: &Config) -> anyhow::Result<Parsed> {
    Space::parse(
        &Input {
            name: "space.yaml".into(),
            text: text.into(),
        },
        base,
    )
}

fn parse(text: &str) -> Parsed {
    parse_with(text, &Config::default()).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The refusal's message; every refusal is bad input (exit 2).
fn err(text: &str) -> String {
    let e = parse_with(text, &Config::default()).expect_err("should be refused");
    let code = e.downcast_ref::<Failure>().map(|f| f.code);
    assert_eq!(code, Some(BAD_INPUT), "{e:#}");
    format!("{e:#}")
}

fn param<'a>(s: &'a Space, key: &str) -> &'a Param {
    &s.params.iter().find(|(k, _)| k == key).unwrap().1
}

const HEAD: &str = "method: random\nmetric: {name: val_loss, goal: minimize}\nparameters:\n";

#[test]
fn every_parameter_form_maps_to_optuna_distributions() {
    let p = parse(&format!(
        "{HEAD}  batch_size: {{values: [8, 16, 32]}}\n  memory_optimized: {{values: [true, false]}}\n  torch_compile_mode: {{values: [default, reduce-overhead]}}\n  seed: {{value: 7}}\n  weight_decay: {{value: 0.05}}\n  epochs: {{min: 2, max: 20}}\n  dropout: {{min: 0.0, max: 0.5}}\n  warmup_epochs: {{distribution: int_uniform, min: 0, max: 2}}\n  learning_rate: {{distribution: log_uniform_values, min: 1e-5, max: 1.0e-2}}\n  temporal_frames: {{distribution: log_uniform_values, min: 2, max: 16}}\n  grad_clip: {{distribution: q_uniform, min: 0.5, max: 2.0, q: 0.25}}\n  architecture.embed_dim: {{distribution: q_uniform, min: 64, max: 256, q: 64}}\n  image_size: {{distribution: categorical, values: [32, 64]}}\n  pin_memory: {{distribution: constant, value: true}}\n"
    ));
    let s = &p.space;
    assert_eq!(s.method, Method::Random);
    assert_eq!(
        s.metric,
        Metric {
            name: "val_loss".into(),
            goal: Direction::Minimize,
            regex: None,
            summary_last: false
        }
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let cat = |v: Vec<Choice>| Param::Sampled(Distribution::Categorical { choices: v });
    assert_eq!(
        param(s, "batch_size"),
        &cat(vec![Choice::Int(8), Choice::Int(16), Choice::Int(32)])
    );
    assert_eq!(
        param(s, "memory_optimized"),
        &cat(vec![Choice::Bool(true), Choice::Bool(false)])
    );
    assert_eq!(
        param(s, "torch_compile_mode"),
        &cat(vec![
            Choice::Str("default".into()),
            Choice::Str("reduce-overhead".into())
        ])
    );
    assert_eq!(param(s, "seed"), &Param::Fixed(ParamValue::Int(7)));
    assert_eq!(
        param(s, "weight_decay"),
        &Param::Fixed(ParamValue::Float(0.05))
    );
    assert_eq!(
        param(s, "pin_memory"),
        &Param::Fixed(ParamValue::Choice(Choice::Bool(true)))
    );
    let int = |low, high, log, step| {
        Param::Sampled(Distribution::Int {
            low,
            high,
            log,
            step,
        })
    };
    let float = |low, high, log, step| {
        Param::Sampled(Distribution::Float {
            low,
            high,
            log,
            step,
        })
    };
    assert_eq!(
        param(s, "epochs"),
        &int(2, 20, false, 1),
        "integer bounds: int_uniform"
    );
    assert_eq!(param(s, "dropout"), &float(0.0, 0.5, false, None));
    assert_eq!(param(s, "warmup_epochs"), &int(0, 2, false, 1));
    assert_eq!(param(s, "learning_rate"), &float(1e-5, 1e-2, true, None));
    assert_eq!(param(s, "temporal_frames"), &int(2, 16, true, 1));
    assert_eq!(param(s, "grad_clip"), &float(0.5, 2.0, false, Some(0.25)));
    assert_eq!(param(s, "architecture.embed_dim"), &int(64, 256, false, 64));
    assert_eq!(
        param(s, "image_size"),
        &cat(vec![Choice::Int(32), Choice::Int(64)])
    );
    let keys: Vec<&str> = s.params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys[..3],
        ["batch_size", "memory_optimized", "torch_compile_mode"],
        "file order"
    );
    assert_eq!((s.run_cap, &s.early_terminate), (None, &None));
    assert!(s.memory_model, "on unless the space says false");
}

#[test]
fn memory_model_false_turns_the_model_off() {
    let p = parse("method: random\nmemory_model: false\nparameters:\n  dropout: {values: [0.1]}\n");
    assert!(!p.space.memory_model);
}

#[test]
fn wandb_extras_nested_parameters_and_early_terminate() {
    let p = parse(
        "name: demo\ndescription: a sweep\nproject: x\ncommand: [python, train.py]\n\
         method: bayes\nmetric: {name: val_loss, target: 0.1}\nrun_cap: 40\n\
         early_terminate: {type: hyperband, min_iter: 3}\n\
         parameters:\n  architecture:\n    parameters:\n      embed_dim: {values: [64, 128]}\n      name: {value: cnn}\n  environment.PYTORCH_ALLOC_CONF: {value: 'expandable_segments:True'}\n",
    );
    let s = &p.space;
    assert_eq!(
        s.method,
        Method::Bayes(crate::sampler::TpeVariant::Multivariate)
    );
    assert_eq!(
        s.metric.goal,
        Direction::Minimize,
        "goal defaults to minimize"
    );
    assert_eq!(s.run_cap, Some(40));
    let keys: Vec<&str> = s.params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "architecture.embed_dim",
            "architecture.name",
            "environment.PYTORCH_ALLOC_CONF"
        ]
    );
    let h = s.early_terminate.as_ref().unwrap();
    assert_eq!(
        (h.eta, h.strict, &h.bands[..3]),
        (3.0, true, &[3, 9, 27][..])
    );
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    assert!(
        p.warnings[0].starts_with("space.yaml: line 4: `command`: ignored"),
        "{:?}",
        p.warnings
    );
    assert!(
        p.warnings[1].contains("line 6: `metric.target`: ignored"),
        "{:?}",
        p.warnings
    );

    let p = parse(&format!(
        "{HEAD}  dropout: {{values: [0.1]}}\nearly_terminate: {{type: hyperband, max_iter: 27, s: 2, eta: 3, strict: false}}\n"
    ));
    let h = p.space.early_terminate.unwrap();
    assert_eq!((h.bands, h.strict), (vec![3, 9], false));
    // No metric: val_loss, minimize, with a warning.
    let p = parse("method: grid\nparameters:\n  dropout: {values: [0.1, 0.2]}\n");
    assert_eq!(
        p.space.metric,
        Metric {
            name: "val_loss".into(),
            goal: Direction::Minimize,
            regex: None,
            summary_last: false
        }
    );
    assert!(p.warnings[0].contains("no `metric`"), "{:?}", p.warnings);
    // A metric of the base config's task, maximized.
    let base = Config {
        task: common::config::Task::Classification,
        ..Config::default()
    };
    let p = parse_with("method: random\nmetric: {name: accuracy, goal: maximize}\nparameters:\n  dropout: {min: 0.0, max: 0.2}\n", &base).unwrap();
    assert_eq!(
        p.space.metric,
        Metric {
            name: "accuracy".into(),
            goal: Direction::Maximize,
            regex: None,
            summary_last: false
        }
    );
}

#[test]
fn unknown_keys_name_the_nearest_known_one_and_the_line() {
    assert_eq!(
        err(&format!("{HEAD}  dropout: {{values: [0.1]}}\n  learning_rte: {{min: 0.001, max: 0.01}}\n")),
        "space.yaml: line 5: `parameters.learning_rte`: `learning_rte` is not a config key; did you mean `learning_rate`?"
    );
    let e = err(&format!(
        "{HEAD}  architecture.embeddim: {{values: [64]}}\n"
    ));
    assert!(
        e.contains("line 4") && e.contains("did you mean `architecture.embed_dim`?"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}  architecture:\n    parameters:\n      heads: {{values: [2]}}\n"
    ));
    assert!(
        e.contains("line 6: `parameters.architecture.parameters.heads`")
            && e.contains("not a config key"),
        "{e}"
    );
    let e = err(&format!("{HEAD}  architecture: {{values: [1]}}\n"));
    assert!(
        e.contains("is a section of the config") && e.contains("architecture.embed_dim"),
        "{e}"
    );
    let e = err(&format!("{HEAD}  zzzzzzzzzzzzzz: {{values: [1]}}\n"));
    assert!(
        e.contains("not a config key (see docs/guide/config.md, \"Config\")"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}  dropout: {{values: [0.1]}}\nmethd: grid\n"
    ));
    assert!(
        e.contains("line 5: `methd`: unknown key `methd`; did you mean `method`?"),
        "{e}"
    );
    let e = err(&format!("{HEAD}  dropout: {{valeus: [0.1]}}\n"));
    assert!(
        e.contains("`parameters.dropout.valeus`: unknown key `valeus`; did you mean `values`?"),
        "{e}"
    );
    let e = err("method: grid\nmetric: {name: val_loss, gaol: minimize}\nparameters:\n  dropout: {values: [0.1]}\n");
    assert!(
        e.contains("line 2: `metric.gaol`") && e.contains("did you mean `goal`?"),
        "{e}"
    );
}

#[test]
fn values_the_schema_refuses_name_the_parameter_line_and_expectation() {
    let e = err(&format!("{HEAD}  batch_size:\n    values: [16, 0, 32]\n"));
    assert_eq!(
        e,
        "space.yaml: line 5: `parameters.batch_size.values[1]`: batch_size = 0 is refused by the config schema: `batch_size`: expected a positive integer, found 0"
    );
    let e = err(&format!("{HEAD}  dropout:\n    min: 0.1\n    max: 1.5\n"));
    assert!(
        e.contains("line 6: `parameters.dropout.max`: dropout = 1.5 is refused")
            && e.contains("expected a number in [0, 1)"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}  epochs: {{distribution: uniform, min: 2, max: 4}}\n"
    ));
    assert!(
        e.contains("`parameters.epochs.min`: epochs = 2.0 is refused")
            && e.contains("expected u32"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}  torch_compile_mode: {{values: [default, fast]}}\n"
    ));
    assert!(
        e.contains("values[1]`: torch_compile_mode = fast") && e.contains("unknown variant `fast`"),
        "{e}"
    );
    // Every refused end is reported, not only the first.
    let e = err(&format!(
        "{HEAD}  batch_size: {{values: [0]}}\n  dropout: {{value: 2.0}}\n"
    ));
    assert_eq!(e.lines().count(), 2, "{e}");
    assert!(e.contains("line 5: `parameters.dropout.value`"), "{e}");
    // Judged with the fixed parameters set: 3 heads divide the fixed 96,
    // not the base config's 128.
    parse(&format!(
        "{HEAD}  architecture.embed_dim: {{value: 96}}\n  architecture.attention_heads: {{values: [3, 6]}}\n"
    ));
    let e = err(&format!(
        "{HEAD}  architecture.embed_dim: {{values: [96, 98]}}\n"
    ));
    assert!(
        e.contains("values[1]`: architecture.embed_dim = 98") && e.contains("divisor of embed_dim"),
        "{e}"
    );
    // A metric train leaves empty for the task.
    let e = err("method: grid\nmetric: {name: accuracy, goal: maximize}\nparameters:\n  dropout: {values: [0.1]}\n");
    assert!(
        e.contains("line 2: `metric.name`: accuracy is empty in metrics.csv for task regression"),
        "{e}"
    );
}

#[test]
fn log_uniform_is_refused_with_the_reason_and_the_fix() {
    let e = err(&format!(
        "{HEAD}  learning_rate:\n    distribution: log_uniform\n    min: -9.21\n    max: -4.61\n"
    ));
    assert!(e.starts_with("space.yaml: line 5: `parameters.learning_rate.distribution`: log_uniform is W&B's old form whose min and max are exponents"), "{e}");
    assert!(
        e.contains("write `distribution: log_uniform_values`") && e.contains("min: 1.00"),
        "{e}"
    );
}

#[test]
fn malformed_spaces_are_refused_with_a_reason() {
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("- 1\n", "expected a mapping at the top level"),
        ("method: [\n", "not YAML"),
        ("parameters:\n  dropout: {values: [0.1]}\n", "missing `method`"),
        ("method: hyperopt\nparameters:\n  dropout: {values: [0.1]}\n", "line 1: `method`: expected grid, random or bayes, found hyperopt"),
        ("method: grid\n", "missing `parameters`"),
        ("method: grid\nparameters: {}\n", "line 2: `parameters`: expected at least one parameter"),
        ("method: grid\nmetric: {name: val_los}\nparameters:\n  dropout: {values: [0.1]}\n", "`metric.name`: `val_los` is not a column of train's metrics.csv; did you mean `val_loss`?"),
        ("method: grid\nmetric: {name: loss/val}\nparameters:\n  dropout: {values: [0.1]}\n", "expected one of val_loss, train_loss, mae, rmse, r2, accuracy, macro_f1"),
        ("method: grid\nmetric: {name: val_loss, goal: lower}\nparameters:\n  dropout: {values: [0.1]}\n", "line 2: `metric.goal`: expected minimize or maximize, found lower"),
        ("method: grid\nmetric: val_loss\nparameters:\n  dropout: {values: [0.1]}\n", "`metric`: expected {name: val_loss, goal: minimize}"),
        ("method: grid\nmetric: {goal: minimize}\nparameters:\n  dropout: {values: [0.1]}\n", "`metric`: missing `name`"),
        ("method: grid\nrun_cap: 0\nparameters:\n  dropout: {values: [0.1]}\n", "`run_cap`: expected a positive integer, found 0"),
        ("method: grid\nmemory_model: off\nparameters:\n  dropout: {values: [0.1]}\n", "line 2: `memory_model`: expected true (predict each point's peak, and refuse a point predicted not to fit) or false (run every point), found off"),
        ("method: grid\nmemory_modle: false\nparameters:\n  dropout: {values: [0.1]}\n", "memory_model"),
        ("method: grid\nschema: v2\nparameters:\n  dropout: {values: [0.1]}\n", "`schema`: expected space/v1"),
    ];
    for (text, want) in cases {
        let e = err(text);
        assert!(e.contains(want), "{text:?}: {e}");
    }
    let p = |body: &str| err(&format!("{HEAD}{body}"));
    let cases: &[(&str, &str)] = &[
        ("  dropout: {min: 0.4, max: 0.1}\n", "line 4: `parameters.dropout.min`: min (0.4) is greater than max (0.1)"),
        ("  dropout: {distribution: q_uniform, min: 0.0, max: 0.5}\n", "distribution q_uniform needs `q` (W&B would default q to 1; write q: 1 if that is meant)"),
        ("  dropout: {distribution: q_uniform, min: 0.0, max: 0.5, q: 0.2}\n", "max - min (0.5) is not a multiple of q (0.2); use max: 0.4"),
        ("  dropout: {distribution: q_uniform, min: 0.0, max: 0.5, q: 0}\n", "expected q > 0"),
        ("  learning_rate: {distribution: log_uniform_values, min: 0, max: 0.1}\n", "log_uniform_values needs min > 0"),
        ("  epochs: {distribution: int_uniform, min: 1.5, max: 4}\n", "int_uniform needs integer min and max"),
        ("  dropout: {values: [0.1], min: 0.0}\n", "`parameters.dropout.min`: not used by distribution categorical (it takes values)"),
        ("  dropout: {value: 0.1, max: 0.2}\n", "not used by distribution constant"),
        ("  dropout: {min: 0.1, q: 0.1, max: 0.2}\n", "`parameters.dropout.q`: not used by distribution uniform"),
        ("  dropout: {min: 0.1}\n", "`max` is missing"),
        ("  dropout: {distribution: uniform}\n", "distribution uniform needs `min`"),
        ("  dropout: {}\n", "expected values: [...], value: x, or min and max"),
        ("  dropout: {min: 0.0, max: .inf}\n", "`parameters.dropout.max`: expected a finite number, found .inf"),
        ("  dropout: {min: a, max: 0.2}\n", "expected a finite number, found a"),
        ("  dropout: {values: []}\n", "`parameters.dropout.values`: expected a non-empty list of values"),
        ("  architecture.channels: {values: [[16, 32], [32, 64]]}\n", "`parameters.architecture.channels.values[0]`: expected a number, string, boolean or null, found"),
        ("  architecture.channels: {value: [16, 32]}\n", "set lists and mappings in the base config"),
        ("  dropout: [0.1, 0.2]\n", "a bare list is the deprecated space/v1 form"),
        ("  dropout: 0.1\n", "for a fixed value write {value: 0.1}"),
        ("  dropout: {distribution: normal, mu: 0.1, sigma: 0.01}\n", "`parameters.dropout.mu`: normal and beta distributions are not supported"),
        ("  dropout: {distribution: q_log_uniform_values, min: 0.1, max: 0.2}\n", "q_log_uniform_values is not supported"),
        ("  dropout: {distribution: unifrom, min: 0.1, max: 0.2}\n", "unknown distribution `unifrom`; did you mean uniform?"),
        ("  batch_size: {values: [8, 16], probabilities: [0.5, 0.5]}\n", "weighted categories are not supported"),
        ("  architecture:\n    parameters: {}\n", "`parameters.architecture.parameters`: expected at least one parameter"),
        ("  dropout: {values: [0.1]}\n  architecture:\n    parameters:\n      embed_dim: {values: [64]}\n  architecture.embed_dim: {values: [32]}\n", "`architecture.embed_dim` is given twice"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: envelope}\n", "`early_terminate.type`: expected hyperband"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband}\n", "needs min_iter (the first band), or max_iter and s"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, max_iter: 27}\n", "max_iter needs s"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, max_iter: 2, s: 1}\n", "no band: max_iter (2) / eta (3)"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: 3, eta: 1}\n", "eta: expected a number > 1, found 1"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: 0}\n", "min_iter: expected at least 1"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: -3}\n", "`early_terminate.min_iter`: expected a non-negative integer, found -3"),
        ("  dropout: {values: [0.1]}\nearly_terminate: {type: hyperband, min_iter: 3, brackets: 2}\n", "`early_terminate.brackets`: unknown key"),
    ];
    for (body, want) in cases {
        let e = p(body);
        assert!(e.contains(want), "{body:?}: {e}");
        assert!(e.starts_with("space.yaml: "), "{e}");
    }
}

#[test]
fn space_v1_is_a_deprecated_alias() {
    let p = parse("schema: space/v1\nparameters:\n  batch_size: [16, 32]\n  memory_optimized: [true, false]\n");
    assert_eq!(p.space.method, Method::Grid);
    assert_eq!(p.space.metric.name, "val_loss");
    assert_eq!(
        param(&p.space, "batch_size"),
        &Param::Sampled(Distribution::Categorical {
            choices: vec![Choice::Int(16), Choice::Int(32)]
        })
    );
    assert_eq!(p.warnings.len(), 1);
    assert!(
        p.warnings[0].starts_with("space.yaml: line 1: `schema`: space/v1 is deprecated"),
        "{:?}",
        p.warnings
    );
    let e = err("schema: space/v1\nparameters:\n  batch_size: [16, 0]\n");
    assert!(
        e.contains("line 3: `parameters.batch_size[1]`: batch_size = 0 is refused"),
        "{e}"
    );
    let e = err("schema: space/v1\nparameters:\n  batchsize: [16]\n");
    assert!(e.contains("did you mean `batch_size`?"), "{e}");
    let e = err("schema: space/v1\nmethod: grid\nparameters:\n  batch_size: [16]\n");
    assert!(
        e.contains("line 2: `method`: space/v1 has only `schema` and `parameters`"),
        "{e}"
    );
    let e = err("schema: space/v1\nparameters:\n  batch_size: 16\n");
    assert!(
        e.contains("`parameters.batch_size`: expected a non-empty list of values"),
        "{e}"
    );
}

#[test]
fn apply_sets_every_parameter_and_round_trips() {
    let p = parse(&format!(
        "{HEAD}  seed: {{value: 7}}\n  batch_size: {{values: [8, 16]}}\n  learning_rate: {{distribution: log_uniform_values, min: 1e-5, max: 1e-2}}\n  memory_optimized: {{values: [true, false]}}\n  architecture.embed_dim: {{min: 32, max: 256}}\n  environment.PYTORCH_ALLOC_CONF: {{value: 'expandable_segments:True'}}\n"
    ));
    let base = Config::default();
    let values: BTreeMap<String, ParamValue> = [
        ("batch_size".to_string(), ParamValue::Choice(Choice::Int(8))),
        ("learning_rate".to_string(), ParamValue::Float(3e-4)),
        (
            "memory_optimized".to_string(),
            ParamValue::Choice(Choice::Bool(true)),
        ),
        ("architecture.embed_dim".to_string(), ParamValue::Int(64)),
    ]
    .into();
    let c = p.space.apply(&base, &values).unwrap();
    assert_eq!(
        c,
        Config {
            seed: 7,
            batch_size: 8,
            learning_rate: 3e-4,
            memory_optimized: true,
            architecture: common::config::Architecture {
                embed_dim: 64,
                ..base.architecture.clone()
            },
            environment: [(
                "PYTORCH_ALLOC_CONF".to_string(),
                "expandable_segments:True".to_string()
            )]
            .into(),
            ..base.clone()
        }
    );
    // The config reads back from its YAML as the same config.
    let back: Config = serde_yaml::from_str(&c.to_yaml()).unwrap();
    assert_eq!(back, c);

    let mut missing = values.clone();
    missing.remove("learning_rate");
    let e = format!("{:#}", p.space.apply(&base, &missing).unwrap_err());
    assert_eq!(e, "no value for parameter `learning_rate`");
    let mut extra = values.clone();
    extra.insert("dropout".into(), ParamValue::Float(0.2));
    let e = format!("{:#}", p.space.apply(&base, &extra).unwrap_err());
    assert_eq!(e, "`dropout` is not a parameter of this space");
    // A combination inside the ends that the schema refuses: 66 is not
    // a multiple of 4 heads. The error names every parameter's value.
    let mut odd = values.clone();
    odd.insert("architecture.embed_dim".into(), ParamValue::Int(66));
    let e = p.space.apply(&base, &odd).unwrap_err();
    assert_eq!(e.downcast_ref::<Failure>().map(|f| f.code), Some(BAD_INPUT));
    let e = format!("{e:#}");
    assert!(
        e.contains("architecture.embed_dim=66")
            && e.contains("`architecture.attention_heads`: expected a divisor"),
        "{e}"
    );
}

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

#[test]
fn example_spaces_parse_against_the_demo_config() {
    let base = Config::load(&common::input::read(&repo("configs/demo_cpu.yaml")).unwrap())
        .unwrap()
        .config;
    for (file, method, keys) in [
        (
            "configs/sweeps/seed004.yaml",
            Method::Bayes(crate::sampler::TpeVariant::Multivariate),
            &["memory_optimized", "batch_size", "learning_rate", "dropout"][..],
        ),
        (
            "configs/sweeps/tiny_cpu.yaml",
            Method::Random,
            &["epochs", "learning_rate", "dropout"][..],
        ),
    ] {
        let input = common::input::read(&repo(file)).unwrap();
        let p = Space::parse(&input, &base).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(p.warnings.is_empty(), "{file}: {:?}", p.warnings);
        assert_eq!(p.space.method, method, "{file}");
        let got: Vec<&str> = p.space.params.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(got, keys, "{file}");
        assert_eq!(
            p.space.metric,
            Metric {
                name: "val_loss".into(),
                goal: Direction::Minimize,
                regex: None,
                summary_last: false
            }
        );
        assert!(p.space.early_terminate.is_some(), "{file}");
        assert!(matches!(
            param(&p.space, "learning_rate"),
            Param::Sampled(Distribution::Float { log: true, .. })
        ));
    }
}

#[test]
fn bayes_variant_is_read_and_bad_values_name_the_line_and_choices() {
    use crate::sampler::TpeVariant;
    let body = "metric: {name: val_loss}\nparameters:\n  learning_rate: {min: 0.0001, max: 0.01}\n";
    let with = |head: &str| format!("{head}{body}");
    let method = |text: &str| parse(text).space.method;
    assert_eq!(
        method(&with("method: bayes\n")),
        Method::Bayes(TpeVariant::Multivariate),
        "Optuna 5's default when the space names none"
    );
    assert_eq!(
        method(&with("method: bayes\nbayes: {variant: univariate}\n")),
        Method::Bayes(TpeVariant::Univariate)
    );
    assert_eq!(
        method(&with("method: tpe\nbayes:\n  variant: multivariate\n")),
        Method::Bayes(TpeVariant::Multivariate)
    );
    let e = err(&with("method: bayes\nbayes: {variant: independent}\n"));
    assert!(
        e.contains("space.yaml: line 2: `bayes.variant`: expected multivariate or univariate, found independent"),
        "{e}"
    );
    let e = err(&with("method: bayes\nbayes: {varaint: univariate}\n"));
    assert!(
        e.contains("line 2") && e.contains("did you mean `variant`?"),
        "{e}"
    );
    let e = err(&with("method: bayes\nbayes: univariate\n"));
    assert!(
        e.contains("line 2: `bayes`: expected {variant: multivariate}")
            && e.contains("found univariate"),
        "{e}"
    );
    let e = err(&with("method: bayes\nbayes: {}\n"));
    assert!(e.contains("`variant` is missing"), "{e}");
    let e = err(&with("method: random\nbayes: {variant: univariate}\n"));
    assert!(
        e.contains(
            "line 2: `bayes`: applies to `method: bayes` only, and this space's method is random"
        ),
        "{e}"
    );
}
