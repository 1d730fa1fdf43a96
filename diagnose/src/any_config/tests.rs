//! `check` and `fix` over texts: each key rule in each format, what is
//! skipped and why, and the strict reading of trainguard's own configs.

use super::*;
use common::wire::hazard::HazardId;

fn no_env(_: &str) -> Option<String> {
    None
}

/// A T4-less target: a host of `ram_gib`, and a report with no GPU when
/// `cpu`.
fn target(ram_gib: u64, cpu: bool) -> Target<'static> {
    Target {
        gpu: None,
        known_no_gpu: cpu,
        host_ram_mib: Some(ram_gib * 1024),
        margin: 0.10,
        env: &no_env,
    }
}

fn input(name: &str, text: &str) -> Input {
    Input {
        name: name.into(),
        text: text.into(),
    }
}

fn ids(c: &Checked) -> Vec<HazardId> {
    c.findings.iter().map(|f| f.id).collect()
}

fn fixed(name: &str, text: &str, t: &Target) -> Fixed {
    fix(&input(name, text), None, t).unwrap().unwrap()
}

#[test]
fn hugging_face_json_mode_alone_turns_compile_on() {
    let text = "{\"output_dir\": \"o\", \"per_device_train_batch_size\": 8,\n \"gradient_checkpointing\": true,\n \"torch_compile_mode\": \"max-autotune\"}";
    let c = check(&input("a.json", text), None, &target(64, false)).unwrap();
    assert_eq!(c.format, Format::Hf);
    assert_eq!(ids(&c), [HazardId::CudaGraphsCheckpointing]);
    let f = &c.findings[0];
    assert_eq!(
        (f.key.as_deref(), f.line),
        (Some("torch_compile_mode"), Some(3))
    );
    // No `torch_compile: false` alternative: Hugging Face would turn it back on.
    assert!(!f.fix.contains("false"), "{}", f.fix);
    // max-autotune-no-cudagraphs records no graphs.
    let safe = text.replace("max-autotune", "max-autotune-no-cudagraphs");
    assert!(check(&input("a.json", &safe), None, &target(64, false))
        .unwrap()
        .findings
        .is_empty());
}

#[test]
fn memory_and_environment_rules_are_skipped_and_said() {
    let text = "output_dir: o\nper_device_train_batch_size: 8\ndataloader_num_workers: 2\n";
    let c = check(&input("a.yaml", text), None, &target(64, false)).unwrap();
    let reasons: Vec<(&[HazardId], &str)> = c
        .skipped
        .iter()
        .map(|s| (s.rules.as_slice(), s.reason.as_str()))
        .collect();
    assert!(reasons
        .iter()
        .any(|(r, why)| r.contains(&HazardId::MemoryExceedsFree) && *why == rules::NO_MODEL));
    assert!(reasons
        .iter()
        .any(|(r, why)| r.contains(&HazardId::LaunchBlocking) && *why == rules::NO_SUCH_KEYS));
    assert_eq!(c.read_keys.len(), 1);
    assert_eq!(c.read_keys[0].reads_as, "num_workers");
    // Host RAM unknown: the workers rule is skipped with that reason.
    let unknown = Target {
        host_ram_mib: None,
        ..target(64, false)
    };
    let c = check(&input("a.yaml", text), None, &unknown).unwrap();
    assert!(c
        .skipped
        .iter()
        .any(|s| s.rules == [HazardId::WorkersSmallHost] && s.reason.contains("host RAM unknown")));
}

#[test]
fn axolotl_cudagraphs_option_and_offloaded_checkpointing() {
    let text = "base_model: m\nmicro_batch_size: 2\nnum_epochs: 1\ndatasets:\n  - path: d\n    type: alpaca\ngradient_checkpointing: offload\ntorch_compile: auto\ntorch_compile_options:\n  triton.cudagraphs: true   # graphs\n";
    let t = target(64, false);
    let c = check(&input("a.yaml", text), None, &t).unwrap();
    assert_eq!(c.format, Format::Axolotl);
    assert_eq!(ids(&c), [HazardId::CudaGraphsCheckpointing]);
    assert_eq!(
        c.findings[0].key.as_deref(),
        Some("torch_compile_options.triton.cudagraphs")
    );
    let f = fixed("a.yaml", text, &t);
    assert!(
        f.text.ends_with("  triton.cudagraphs: false   # graphs\n"),
        "{}",
        f.text
    );
    assert!(f.left.is_empty());
    // Without torch_compile, Axolotl passes no mode on: nothing to find.
    let off = text.replace("torch_compile: auto", "torch_compile: false");
    assert!(check(&input("a.yaml", &off), None, &t)
        .unwrap()
        .findings
        .is_empty());
}

#[test]
fn gpu_features_on_a_cpu_target() {
    let hf = "{\"output_dir\": \"o\", \"per_device_train_batch_size\": 8, \"fp16\": true, \"torch_compile_mode\": \"default\"}";
    let cpu = target(64, true);
    let c = check(&input("a.json", hf), None, &cpu).unwrap();
    assert_eq!(ids(&c), [HazardId::GpuFeaturesWithoutGpu]);
    let ev: Vec<&str> = c.findings[0]
        .evidence
        .iter()
        .map(|k| k.key.as_str())
        .collect();
    assert_eq!(ev, ["torch_compile_mode", "fp16"]);
    // fp16 is switched off; the mode must go by hand (it turns compile on).
    let f = fixed("a.json", hf, &cpu);
    assert_eq!(f.text, hf.replace("\"fp16\": true", "\"fp16\": false"));
    assert!(
        f.unfixable[0].contains("remove torch_compile_mode"),
        "{:?}",
        f.unfixable
    );
    // Axolotl: torch_compile goes false.
    let ax = "base_model: m\nmicro_batch_size: 1\ntorch_compile: true\n";
    let f = fixed("a.yaml", ax, &cpu);
    assert_eq!(
        f.text,
        "base_model: m\nmicro_batch_size: 1\ntorch_compile: false\n"
    );
    assert!(f.unfixable.is_empty() && f.left.is_empty());
}

#[test]
fn pin_memory_without_workers_only_when_written() {
    let t = target(64, false);
    let pinned = "output_dir: o\nper_device_train_batch_size: 8\ndataloader_pin_memory: true\n";
    let c = check(&input("a.yaml", pinned), None, &t).unwrap();
    assert_eq!(ids(&c), [HazardId::PinMemoryWithoutWorkers]);
    assert!(
        c.findings[0].fix.contains("dataloader_num_workers > 0"),
        "{}",
        c.findings[0].fix
    );
    let with_workers = format!("{pinned}dataloader_num_workers: 2\n");
    assert!(check(&input("a.yaml", &with_workers), None, &t)
        .unwrap()
        .findings
        .is_empty());
    // Hugging Face's default pin_memory is true, but an unwritten key is not read.
    let unwritten = "output_dir: o\nper_device_train_batch_size: 8\n";
    assert!(check(&input("a.yaml", unwritten), None, &t)
        .unwrap()
        .findings
        .is_empty());
}

#[test]
fn keys_in_lists_and_every_graph_key_fixed() {
    let text = "stages:\n  - name: warm\n    torch_compile_mode: reduce-overhead\n  - name: main\n    torch_compile_mode: max-autotune\nmodel: {gradient_checkpointing: yes}\n";
    let t = target(64, false);
    let c = check(&input("p.yaml", text), None, &t).unwrap();
    assert_eq!(c.format, Format::Generic);
    let keys: Vec<&str> = c.findings.iter().filter_map(|f| f.key.as_deref()).collect();
    assert_eq!(
        keys,
        [
            "stages[0].torch_compile_mode",
            "stages[1].torch_compile_mode"
        ]
    );
    let f = fixed("p.yaml", text, &t);
    assert_eq!(
        f.text,
        text.replace("reduce-overhead", "default")
            .replace("max-autotune", "default")
    );
    assert_eq!(f.changes.len(), 2);
}

#[test]
fn trainguard_configs_are_read_strictly() {
    let t = target(64, false);
    let e = check(&input("c.yaml", "batch_size: 4\nepoch: 3\n"), None, &t)
        .err()
        .unwrap();
    assert_eq!(common::exit::code_of(&e), common::exit::BAD_INPUT);
    let message = format!("{e:#}");
    assert!(
        message.contains("unknown key `epoch`; did you mean `epochs`?"),
        "{message}"
    );
    assert!(
        message.contains("2 of its 2 top-level keys are trainguard's"),
        "{message}"
    );
    // A value error is trainguard's message alone.
    let e = check(&input("c.yaml", "batch_size: 0\n"), None, &t)
        .err()
        .unwrap();
    assert!(!format!("{e:#}").contains("--as"), "{e:#}");
    let ok = check(&input("c.yaml", "batch_size: 4\nepochs: 3\n"), None, &t).unwrap();
    assert_eq!(ok.format, Format::Trainguard);
    assert!(ok.trainguard.is_some() && ok.read_keys.is_empty());
}

#[test]
fn as_parses_the_four_names_and_refuses_others() {
    assert_eq!(parse_as("any"), Ok(Format::Generic));
    assert_eq!(parse_as("hf"), Ok(Format::Hf));
    assert!(parse_as("json")
        .unwrap_err()
        .contains("expected hf, axolotl, trainguard or any"));
}

#[test]
fn a_file_with_nothing_to_check_is_refused_unless_named() {
    let t = target(64, false);
    let space = "method: grid\nmetric: {name: val_loss, goal: minimize}\nparameters:\n  lr: {values: [1, 2]}\n";
    let e = check(&input("s.yaml", space), None, &t).err().unwrap();
    assert_eq!(common::exit::code_of(&e), common::exit::BAD_INPUT);
    let message = format!("{e:#}");
    assert!(
        message.contains(
            "s.yaml: not a config cfgcheck knows (top-level keys: method, metric, parameters)"
        ),
        "{message}"
    );
    let c = check(&input("s.yaml", space), Some(Format::Generic), &t).unwrap();
    assert!(c.findings.is_empty() && c.read_keys.is_empty());
}
