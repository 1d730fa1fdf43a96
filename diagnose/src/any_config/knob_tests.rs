//! `knobs` and `turn` over texts of each format: where each knob is found,
//! each default a known format adds, what a file of no known schema never
//! guesses, and the turned text read back by the tools that read it.

use super::*;
use crate::keys::Scalar;
use crate::knobs::{Knob, Turn};

fn input(name: &str, text: &str) -> Input {
    Input {
        name: name.into(),
        text: text.into(),
    }
}

fn turns(list: &[(Knob, Scalar)]) -> Vec<Turn> {
    list.iter()
        .map(|(knob, value)| Turn {
            knob: *knob,
            value: value.clone(),
            why: "out of memory".into(),
        })
        .collect()
}

fn int(n: i64) -> Scalar {
    Scalar::Int(n)
}

fn s(v: &str) -> Scalar {
    Scalar::Str(v.into())
}

/// Each knob's place in words and its value.
fn table(k: &ConfigKnobs) -> Vec<(Knob, String, Scalar)> {
    k.knobs
        .iter()
        .map(|k| (k.knob, k.place(), k.value.clone()))
        .collect()
}

fn turned(i: &Input, user: &[(Knob, String)], list: &[(Knob, Scalar)]) -> Turned {
    turn(i, None, &turns(list), user).unwrap().unwrap()
}

fn words(t: &Turned) -> Vec<String> {
    t.changes.iter().map(KnobChange::words).collect()
}

/// The ladder's out-of-memory and CUDA-graph turns, all at once.
fn the_fix() -> Vec<(Knob, Scalar)> {
    vec![
        (Knob::Batch, int(32)),
        (Knob::Accumulation, int(2)),
        (Knob::Checkpointing, Scalar::Bool(true)),
        (Knob::CompileMode, s("default")),
        (Knob::Precision, s("bf16")),
    ]
}

const HF_YAML: &str = "# TrainingArguments\noutput_dir: out\nper_device_train_batch_size: 64   # per GPU\nlearning_rate: 2.0e-5\nfp16: true   # a T4\ntorch_compile_mode: reduce-overhead  # CUDA graphs\n";

#[test]
fn hugging_face_yaml_knobs_and_their_defaults() {
    let k = knobs(&input("args.yaml", HF_YAML), None, &[]).unwrap();
    assert_eq!(k.format, Format::Hf);
    assert_eq!(
        table(&k),
        [
            (
                Knob::Batch,
                "per_device_train_batch_size (line 3)".into(),
                int(64)
            ),
            (
                Knob::Accumulation,
                "gradient_accumulation_steps (not set: the default)".into(),
                int(1)
            ),
            (
                Knob::Checkpointing,
                "gradient_checkpointing (not set: the default)".into(),
                Scalar::Bool(false)
            ),
            (
                Knob::CompileMode,
                "torch_compile_mode (line 6)".into(),
                s("reduce-overhead")
            ),
            (Knob::Precision, "fp16 (line 5)".into(), s("fp16")),
        ]
    );
    assert!(k.notes.is_empty());
    // As the ladder reads them.
    let found = k.found();
    assert_eq!(found[0].value, Some(int(64)));
    assert_eq!(found[0].place, "per_device_train_batch_size (line 3)");
}

#[test]
fn hugging_face_yaml_turned_keeps_comments_and_adds_what_is_missing() {
    let i = input("args.yaml", HF_YAML);
    let t = turned(&i, &[], &the_fix());
    assert_eq!(
        t.text,
        "# TrainingArguments\noutput_dir: out\nper_device_train_batch_size: 32   # per GPU\nlearning_rate: 2.0e-5\nfp16: false   # a T4\ntorch_compile_mode: default  # CUDA graphs\ngradient_accumulation_steps: 2\ngradient_checkpointing: true\nbf16: true\n"
    );
    assert_eq!(
        words(&t),
        [
            "per_device_train_batch_size: 64 -> 32 (out of memory)",
            "gradient_accumulation_steps (added): 1 -> 2 (out of memory)",
            "gradient_checkpointing (added): false -> true (out of memory)",
            "torch_compile_mode: reduce-overhead -> default (out of memory)",
            "fp16: true -> false (out of memory)",
            "bf16 (added): false -> true (out of memory)",
        ]
    );
    assert!(t.notes.is_empty());
    // The user's text is untouched; the new one loads with the new values.
    assert!(i.text.contains("per_device_train_batch_size: 64"));
    let v: serde_yaml::Value = serde_yaml::from_str(&t.text).unwrap();
    assert_eq!(v["per_device_train_batch_size"], 32);
    assert_eq!(v["gradient_accumulation_steps"], 2);
    assert_eq!(v["bf16"], true);
    assert_eq!(v["fp16"], false);
    // Turned again to the same values: nothing left to change.
    let again = turned(&input("args.yaml", &t.text), &[], &the_fix());
    assert!(again.changes.is_empty() && again.text == t.text);
    assert_eq!(again.notes.len(), 5, "{:?}", again.notes);
}

#[test]
fn hugging_face_json_changes_only_values_and_adds_members() {
    let text = "{\n  \"output_dir\": \"out\",\n  \"per_device_train_batch_size\": 64,\n  \"gradient_accumulation_steps\": 1,\n  \"torch_compile\": true,\n  \"fp16\": false\n}\n";
    let i = input("args.json", text);
    let k = knobs(&i, None, &[]).unwrap();
    assert_eq!(k.format, Format::Hf);
    // torch.compile on with no mode: its `default`.
    assert_eq!(k.get(Knob::CompileMode).unwrap().value, s("default"));
    assert_eq!(k.get(Knob::Precision).unwrap().value, s("no"));
    let t = turned(&i, &[], &the_fix());
    assert_eq!(
        t.text,
        "{\n  \"output_dir\": \"out\",\n  \"per_device_train_batch_size\": 32,\n  \"gradient_accumulation_steps\": 2,\n  \"torch_compile\": true,\n  \"fp16\": false,\n  \"gradient_checkpointing\": true,\n  \"bf16\": true\n}\n"
    );
    // Compile mode `default` already: said, not added.
    assert_eq!(
        t.notes,
        ["compile_mode: default already (torch_compile_mode (not set: the default))"]
    );
    let v: serde_json::Value = serde_json::from_str(&t.text).unwrap();
    assert_eq!(v["per_device_train_batch_size"], 32);
    assert_eq!(v["gradient_accumulation_steps"], 2);
    assert_eq!(v["gradient_checkpointing"], true);
    assert_eq!((&v["bf16"], &v["fp16"]), (&true.into(), &false.into()));
}

#[test]
fn no_compile_mode_is_added_where_nothing_compiles() {
    // Hugging Face turns compile on for any mode: adding one would.
    let i = input(
        "args.json",
        "{\"output_dir\": \"o\", \"learning_rate\": 0.001, \"per_device_train_batch_size\": 8}",
    );
    assert_eq!(
        knobs(&i, None, &[])
            .unwrap()
            .get(Knob::CompileMode)
            .unwrap()
            .value,
        Scalar::Null
    );
    let t = turned(&i, &[], &[(Knob::CompileMode, s("default"))]);
    assert!(t.changes.is_empty() && t.text == i.text);
    assert!(t.notes[0].contains("not set"), "{:?}", t.notes);
    // Nor where TrainingArguments.to_json_string() wrote every field: a
    // null mode is none.
    let dump = input(
        "args.json",
        "{\"output_dir\": \"o\", \"per_device_train_batch_size\": 8, \"torch_compile\": false, \"torch_compile_mode\": null}",
    );
    let t = turned(&dump, &[], &[(Knob::CompileMode, s("default"))]);
    assert!(t.changes.is_empty() && t.text == dump.text);
    // With compile on, the null mode is `default` already.
    let on = input("args.json", &dump.text.replace("false", "true"));
    let k = knobs(&on, None, &[]).unwrap();
    assert_eq!(k.get(Knob::CompileMode).unwrap().value, s("default"));
}

#[test]
fn axolotl_yaml_with_its_auto_bf16() {
    let text = include_str!("../../../configs/foreign/axolotl_lora.yaml");
    let i = input("axolotl_lora.yaml", text);
    let k = knobs(&i, None, &[]).unwrap();
    assert_eq!(k.format, Format::Axolotl);
    let value = |knob| k.get(knob).unwrap().value.clone();
    assert_eq!(value(Knob::Batch), int(2));
    assert_eq!(value(Knob::Accumulation), int(4));
    assert_eq!(value(Knob::Checkpointing), Scalar::Bool(true));
    assert_eq!(value(Knob::CompileMode), s("reduce-overhead"));
    assert_eq!(value(Knob::Precision), s("auto"));
    let t = turned(
        &i,
        &[],
        &[
            (Knob::CompileMode, s("default")),
            (Knob::Batch, int(1)),
            (Knob::Accumulation, int(8)),
            (Knob::Precision, s("bf16")),
        ],
    );
    assert_eq!(
        words(&t),
        [
            "torch_compile_mode: reduce-overhead -> default (out of memory)",
            "micro_batch_size: 2 -> 1 (out of memory)",
            "gradient_accumulation_steps: 4 -> 8 (out of memory)",
            "bf16: auto -> true (out of memory)",
        ]
    );
    assert!(t
        .text
        .contains("torch_compile_mode: default  # CUDA graphs: fewer kernel launches\n"));
    assert!(t
        .text
        .contains("torch_compile: true                  # compiled forward and backward\n"));
    assert_eq!(t.text.lines().count(), text.lines().count());
}

#[test]
fn axolotl_batch_size_implies_the_accumulation() {
    let text = "base_model: m\ndatasets: [{path: d, type: alpaca}]\nbatch_size: 16\nmicro_batch_size: 4\nnum_epochs: 1\n";
    let i = input("a.yaml", text);
    let k = knobs(&i, None, &[]).unwrap();
    assert_eq!(k.format, Format::Axolotl);
    let acc = k.get(Knob::Accumulation).unwrap();
    assert_eq!(
        (acc.place(), &acc.value),
        ("batch_size / micro_batch_size (implied)".into(), &int(4))
    );
    // No gradient_accumulation_steps added: Axolotl refuses both.
    let t = turned(
        &i,
        &[],
        &[(Knob::Batch, int(2)), (Knob::Accumulation, int(8))],
    );
    assert_eq!(words(&t), ["micro_batch_size: 4 -> 2 (out of memory)"]);
    assert!(!t.text.contains("gradient_accumulation_steps"));
    let e = turn(&i, None, &turns(&[(Knob::Accumulation, int(8))]), &[])
        .unwrap()
        .unwrap_err();
    assert!(e.contains("batch_size / micro_batch_size"), "{e}");
}

#[test]
fn trainguard_micro_batches_and_its_schema_read_back() {
    let text = include_str!("../../../configs/demo_cpu.yaml");
    let i = input("demo_cpu.yaml", text);
    let k = knobs(&i, None, &[]).unwrap();
    assert_eq!(k.format, Format::Trainguard);
    assert_eq!(
        table(&k),
        [
            (
                Knob::Batch,
                "micro_batch_size (not set: the default)".into(),
                int(32)
            ),
            (
                Knob::Accumulation,
                "batch_size / micro_batch_size (implied)".into(),
                int(1)
            ),
            (
                Knob::Checkpointing,
                "gradient_checkpointing (line 5)".into(),
                Scalar::Bool(true)
            ),
            (
                Knob::CompileMode,
                "torch_compile_mode (not set: the default)".into(),
                s("default")
            ),
            (Knob::Precision, "mixed_precision (line 7)".into(), s("no")),
        ]
    );
    let t = turned(
        &i,
        &[],
        &[
            (Knob::Batch, int(16)),
            (Knob::Accumulation, int(2)),
            (Knob::Precision, s("bf16")),
        ],
    );
    assert_eq!(
        words(&t),
        [
            "micro_batch_size (added): 32 -> 16 (out of memory)",
            "mixed_precision: off -> bf16 (out of memory)",
        ]
    );
    assert_eq!(
        t.notes,
        ["accumulation: implied by batch_size / micro_batch_size, 2 with the batch as turned"]
    );
    assert!(t.text.starts_with("# The CPU demo"));
    let loaded = common::config::Config::load(&input("demo_cpu.yaml", &t.text)).unwrap();
    assert_eq!(loaded.config.micro_batch_size, Some(16));
    assert_eq!(loaded.config.batch_size, 32);
    assert_eq!(
        loaded.config.mixed_precision,
        common::wire::config::Precision::Bf16
    );
}

#[test]
fn trainguard_batch_size_stays_the_effective_batch() {
    let i = input(
        "demo_cpu.yaml",
        include_str!("../../../configs/demo_cpu.yaml"),
    );
    // An accumulation that disagrees with the batch is refused, and so is a
    // micro-batch over the batch.
    let e = turn(
        &i,
        None,
        &turns(&[(Knob::Batch, int(16)), (Knob::Accumulation, int(4))]),
        &[],
    )
    .unwrap()
    .unwrap_err();
    assert!(e.contains("2 with the turns given, not 4"), "{e}");
    // A key added says what its default was.
    let oom = input(
        "gpu_oom.yaml",
        include_str!("../../../configs/gpu_oom.yaml"),
    );
    let t = turned(&oom, &[], &[(Knob::Precision, s("bf16"))]);
    assert_eq!(
        words(&t),
        ["mixed_precision (added): off -> bf16 (out of memory)"]
    );
    let e = turn(&i, None, &turns(&[(Knob::Batch, int(64))]), &[])
        .unwrap()
        .unwrap_err();
    assert!(e.contains("does not read back"), "{e}");
    // Even at its value now: 1 is not what micro-batches of 16 make.
    let e = turn(
        &i,
        None,
        &turns(&[(Knob::Batch, int(16)), (Knob::Accumulation, int(1))]),
        &[],
    )
    .unwrap()
    .unwrap_err();
    assert!(e.contains("2 with the turns given, not 1"), "{e}");
}

const NESTED: &str = "# the project's own\nmodel:\n  name: resnet\ntraining:\n  batch_size: 64   # per step\n  accum_steps: 1\n  precision: 16-mixed\n";

#[test]
fn a_projects_nested_yaml_with_the_users_name() {
    let i = input("project.yaml", NESTED);
    let user = [(Knob::Accumulation, "accum_steps".to_string())];
    let k = knobs(&i, None, &user).unwrap();
    assert_eq!(k.format, Format::Generic);
    assert_eq!(
        table(&k),
        [
            (Knob::Batch, "training.batch_size (line 5)".into(), int(64)),
            (
                Knob::Accumulation,
                "training.accum_steps (line 6)".into(),
                int(1)
            ),
            (
                Knob::Precision,
                "training.precision (line 7)".into(),
                s("fp16")
            ),
        ]
    );
    let t = turned(
        &i,
        &user,
        &[
            (Knob::Batch, int(32)),
            (Knob::Accumulation, int(2)),
            (Knob::Precision, s("bf16")),
        ],
    );
    assert_eq!(
        t.text,
        "# the project's own\nmodel:\n  name: resnet\ntraining:\n  batch_size: 32   # per step\n  accum_steps: 2\n  precision: bf16-mixed\n"
    );
    // Without the name: the accumulation is not guessed.
    let k = knobs(&i, None, &[]).unwrap();
    assert!(k.get(Knob::Accumulation).is_none());
    // Nothing is added to a file of no known schema.
    let e = turn(
        &i,
        None,
        &turns(&[(Knob::Checkpointing, Scalar::Bool(true))]),
        &[],
    )
    .unwrap()
    .unwrap_err();
    assert!(e.contains("--knob checkpointing=KEY"), "{e}");
    // A name not in the file, or in it twice, is said.
    let k = knobs(&i, None, &[(Knob::Accumulation, "accum".into())]).unwrap();
    assert_eq!(
        k.notes,
        ["--knob accumulation=accum: the config has no key `accum` holding a value"]
    );
}

#[test]
fn a_generic_file_without_a_batch_key_has_no_batch() {
    let text = "model:\n  name: x\ntrainer:\n  max_epochs: 3\n  gradient_checkpointing: false\n";
    let i = input("p.yaml", text);
    let k = knobs(&i, None, &[]).unwrap();
    assert_eq!(k.format, Format::Generic);
    let knobs_found: Vec<Knob> = k.knobs.iter().map(|k| k.knob).collect();
    assert_eq!(knobs_found, [Knob::Checkpointing]);
    let e = turn(&i, None, &turns(&[(Knob::Batch, int(2))]), &[])
        .unwrap()
        .unwrap_err();
    assert!(e.contains("no batch key"), "{e}");
    // Two batch sizes cannot be told apart; a dotted path names one.
    let two = input(
        "p.yaml",
        "train:\n  batch_size: 8\nval:\n  batch_size: 16\n",
    );
    let k = knobs(&two, None, &[]).unwrap();
    assert!(k.get(Knob::Batch).is_none());
    assert!(k.notes[0].contains("train.batch_size, line 2; val.batch_size, line 4"));
    let user = [(Knob::Batch, "train.batch_size".to_string())];
    let t = turned(&two, &user, &[(Knob::Batch, int(4))]);
    assert_eq!(t.text, "train:\n  batch_size: 4\nval:\n  batch_size: 16\n");
}

#[test]
fn a_precision_no_key_can_say_is_refused() {
    let i = input("p.yaml", "trainer:\n  fp16: true\n  batch_size: 8\n");
    let k = knobs(&i, None, &[]).unwrap();
    assert_eq!(k.get(Knob::Precision).unwrap().value, s("fp16"));
    let e = turn(&i, None, &turns(&[(Knob::Precision, s("bf16"))]), &[])
        .unwrap()
        .unwrap_err();
    assert!(e.contains("no key of this config can ask for bf16"), "{e}");
    // A switch whose name says no precision is not guessed at.
    let amp = input("p.yaml", "trainer:\n  use_amp: false\n");
    let user = [(Knob::Precision, "use_amp".to_string())];
    assert_eq!(
        knobs(&amp, None, &user)
            .unwrap()
            .get(Knob::Precision)
            .unwrap()
            .value,
        s("no")
    );
    let e = turn(&amp, None, &turns(&[(Knob::Precision, s("bf16"))]), &user)
        .unwrap()
        .unwrap_err();
    assert!(
        e.contains("cannot tell what `trainer.use_amp: false`"),
        "{e}"
    );
    // Accelerate's `mixed_precision: no` (false to YAML 1.1) is a word.
    let acc = input(
        "p.yaml",
        "accelerate:\n  mixed_precision: no\n  gradient_accumulation_steps: 1\n",
    );
    let t = turned(&acc, &[], &[(Knob::Precision, s("bf16"))]);
    assert_eq!(
        t.text,
        "accelerate:\n  mixed_precision: bf16\n  gradient_accumulation_steps: 1\n"
    );
    // A value of the wrong kind for its knob.
    let e = turn(&i, None, &turns(&[(Knob::Batch, s("half"))]), &[])
        .unwrap()
        .unwrap_err();
    assert!(e.contains("expected a whole number"), "{e}");
}

#[test]
fn a_section_is_never_a_knobs_key() {
    // DeepSpeed's sections: `fp16` holds `enabled`, not a value to replace.
    let text = "{\"train_micro_batch_size_per_gpu\": 4, \"fp16\": {\"enabled\": true}, \"trainer\": {\"batch_size\": 4}}";
    let i = input("ds.json", text);
    let k = knobs(&i, None, &[]).unwrap();
    assert_eq!(k.format, Format::Generic);
    assert!(k.get(Knob::Precision).is_none());
    let e = turn(&i, None, &turns(&[(Knob::Precision, s("bf16"))]), &[])
        .unwrap()
        .unwrap_err();
    assert!(e.contains("no precision key"), "{e}");
    // Named by the user, a section is not taken either; its value is.
    let k = knobs(&i, None, &[(Knob::Batch, "trainer".into())]).unwrap();
    assert!(k.get(Knob::Batch).is_none());
    let user = [(Knob::Precision, "fp16.enabled".to_string())];
    let k = knobs(&i, None, &user).unwrap();
    assert_eq!(k.get(Knob::Precision).unwrap().value, s("fp16"));
    let t = turned(&i, &user, &[(Knob::Precision, s("no"))]);
    assert_eq!(
        t.text,
        "{\"train_micro_batch_size_per_gpu\": 4, \"fp16\": {\"enabled\": false}, \"trainer\": {\"batch_size\": 4}}"
    );
}

/// The ladder's out-of-memory turns for the knobs found: half the batch
/// (its smallest factor) with that much more accumulation, checkpointing
/// on, compile mode `default`, bf16.
fn ladder_like(k: &ConfigKnobs) -> Vec<(Knob, Scalar)> {
    let mut out = vec![];
    let int_of = |knob| match k.get(knob).map(|k| &k.value) {
        Some(Scalar::Int(n)) => Some(*n),
        _ => None,
    };
    if let (Some(b), Some(a)) = (int_of(Knob::Batch), int_of(Knob::Accumulation)) {
        let f = (2..=b).find(|d| b % d == 0).unwrap_or(1);
        out.push((Knob::Batch, int(b / f)));
        out.push((Knob::Accumulation, int(a * f)));
    }
    for (knob, v) in [
        (Knob::Checkpointing, Scalar::Bool(true)),
        (Knob::CompileMode, s("default")),
        (Knob::Precision, s("bf16")),
    ] {
        if k.get(knob).is_some() {
            out.push((knob, v));
        }
    }
    out
}

#[test]
fn every_training_config_in_the_repository_turns_and_reads_back() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    for name in [
        "demo_cpu.yaml",
        "colab_full_stable.yaml",
        "colab_optimized.yaml",
        "colab_optimized_full.yaml",
        "gpu_oom.yaml",
        "foreign/hf_sft.yaml",
        "foreign/hf_training_args.json",
        "foreign/axolotl_lora.yaml",
        "foreign/project_nested.yaml",
        "own_script/a.yaml",
    ] {
        let text = std::fs::read_to_string(root.join(name)).unwrap();
        let i = input(name, &text);
        let k = knobs(&i, None, &[]).unwrap();
        let list = ladder_like(&k);
        let t = turn(&i, None, &turns(&list), &[])
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        match k.format {
            Format::Trainguard => {
                common::config::Config::load(&input(name, &t.text)).unwrap();
            }
            _ if name.ends_with(".json") => {
                serde_json::from_str::<serde_json::Value>(&t.text).unwrap();
            }
            _ => {
                serde_yaml::from_str::<serde_yaml::Value>(&t.text).unwrap();
            }
        }
        let after = knobs(&input(name, &t.text), Some(k.format), &[]).unwrap();
        for (knob, v) in &list {
            assert_eq!(&after.get(*knob).unwrap().value, v, "{name}: {knob:?}");
        }
        // Each line the turns did not touch is as it was (JSON's last member
        // gains the comma before one added), and the lines added are the
        // keys added.
        let touched: Vec<usize> = t.changes.iter().filter_map(|c| c.line).collect();
        let added: Vec<&str> = t
            .changes
            .iter()
            .filter(|c| c.line.is_none())
            .map(|c| c.key.as_str())
            .collect();
        let is_added = |l: &str| {
            let l = l.trim_start();
            added
                .iter()
                .any(|k| l.starts_with(&format!("{k}:")) || l.starts_with(&format!("\"{k}\":")))
        };
        let kept: Vec<&str> = t.text.lines().filter(|l| !is_added(l)).collect();
        assert_eq!(kept.len(), text.lines().count(), "{name}");
        assert_eq!(t.text.lines().count(), kept.len() + added.len(), "{name}");
        for (n, (now, line)) in kept.iter().zip(text.lines()).enumerate() {
            if !touched.contains(&(n + 1)) && *now != format!("{line},") {
                assert_eq!(*now, line, "{name}: line {}", n + 1);
            }
        }
    }
}

#[test]
fn trainguard_null_micro_batch_is_set_in_place() {
    for null in ["null", "~", ""] {
        let text = format!("batch_size: 32\nmicro_batch_size: {null}\nepochs: 2\n");
        let i = input("c.yaml", &text);
        let k = knobs(&i, None, &[]).unwrap();
        let b = k.get(Knob::Batch).unwrap();
        assert_eq!(
            (b.place(), &b.value),
            ("micro_batch_size (line 2)".into(), &int(32))
        );
        let t = turned(
            &i,
            &[],
            &[(Knob::Batch, int(8)), (Knob::Accumulation, int(4))],
        );
        assert_eq!(
            t.text, "batch_size: 32\nmicro_batch_size: 8\nepochs: 2\n",
            "{null:?}"
        );
    }
}
