//! What every parser a user can feed must do with any bytes: give a value,
//! or an error that exits 2 (bad input) and names the file. Never panic (the
//! fuzzer catches one), never hang (its timeout), never allocate without
//! bound (its RSS limit). One function per fuzz target (fuzz/targets/),
//! each returning the property it found broken; tests/corpus.rs replays the
//! checked-in corpus and every regression through them on stable Rust.

use common::input::Input;
use std::path::Path;

/// The name the input goes by; every refusal must name it.
pub const NAME: &str = "fuzz-input";

/// A target's check: Err says which property an input broke.
pub type Check = fn(&[u8]) -> Result<(), String>;

/// The targets, by name (fuzz/targets/fuzz_targets/NAME.rs,
/// fuzz/corpus/NAME/).
pub const TARGETS: &[(&str, Check)] = &[
    ("config", config),
    ("report", report),
    ("space", space),
    ("journal", journal),
    ("checkpoint_meta", checkpoint_meta),
    ("explain", explain),
    ("tensor_headers", tensor_headers),
    ("wire", wire),
    ("readers", readers),
    ("command", command),
    ("verdict", verdict),
    ("any_config", any_config),
    ("scan", scan),
];

/// A refusal is right when it exits 2 and names the input.
fn refused_well(err: &anyhow::Error) -> Result<(), String> {
    let code = common::exit::code_of(err);
    let message = format!("{err:#}");
    if code != common::exit::BAD_INPUT {
        return Err(format!("exit {code}, not 2 (bad input): {message}"));
    }
    if !message.contains(NAME) {
        return Err(format!("the message does not name the file: {message}"));
    }
    Ok(())
}

fn check<T>(r: anyhow::Result<T>) -> Result<(), String> {
    match r {
        Ok(_) => Ok(()),
        Err(e) => refused_well(&e),
    }
}

/// The bytes as a tool reads a file (size cap, UTF-8), or its refusal.
fn input(data: &[u8]) -> Result<Input, Result<(), String>> {
    common::input::read_from(NAME, data).map_err(|e| refused_well(&e))
}

/// A config (cfgcheck, verify-fixes, train).
pub fn config(data: &[u8]) -> Result<(), String> {
    match input(data) {
        Ok(i) => check(common::config::Config::load(&i)),
        Err(r) => r,
    }
}

/// A memdiag report, in any of its formats (YAML, JSON, CSV).
pub fn report(data: &[u8]) -> Result<(), String> {
    match input(data) {
        Ok(i) => check(common::report::Report::parse(&i)),
        Err(r) => r,
    }
}

/// A sweep's search space (W&B YAML), checked against the default config.
pub fn space(data: &[u8]) -> Result<(), String> {
    match input(data) {
        Ok(i) => check(sweep::space::Space::parse(
            &i,
            &common::config::Config::default(),
        )),
        Err(r) => r,
    }
}

/// A sweep's journal as `--resume` replays it; one that replays, replays
/// the same from its checkpoint.
pub fn journal(data: &[u8]) -> Result<(), String> {
    let path = Path::new(NAME);
    if let Err(e) = sweep::journal::replay(data, path) {
        return refused_well(&e);
    }
    match sweep::journal::checkpoint_agrees(data, path) {
        Ok(true) => Ok(()),
        Ok(false) => Err("its checkpoint replays to another state".into()),
        Err(e) => Err(format!("its checkpoint does not replay: {e:#}")),
    }
}

/// A checkpoint's metadata (safetensors' string map).
pub fn checkpoint_meta(data: &[u8]) -> Result<(), String> {
    // The format stores a map of strings; other JSON never reaches us.
    let Ok(map) = serde_json::from_slice(data) else {
        return Ok(());
    };
    check(common::wire::train::CheckpointMeta::from_map(NAME, &map))
}

/// The log `cfgcheck --explain` reads.
pub fn explain(data: &[u8]) -> Result<(), String> {
    check(diagnose::explain::scan(NAME, data))
}

/// safetensors' and .npy's headers (train's data files and checkpoints).
pub fn tensor_headers(data: &[u8]) -> Result<(), String> {
    check(common::tensor_headers::safetensors_header(
        &mut &data[..],
        NAME,
    ))?;
    // Its errors are phrases; train prefixes the file and array.
    let _ = common::tensor_headers::npy_header(&mut &data[..]);
    Ok(())
}

/// The documents a tool reads back: a sweep's sweep.yaml (and its space)
/// and slurm.yaml, a run's summary.yaml and chain.yaml, metrics.csv.
pub fn wire(data: &[u8]) -> Result<(), String> {
    use common::wire::{parse, train};
    let i = match input(data) {
        Ok(i) => i,
        Err(r) => return r,
    };
    match parse::<common::wire::sweep::Settings>(NAME, &i.text) {
        // sweep.yaml keeps the space's text under the space's own name.
        Ok(settings) => {
            if let Err(e) = sweep::layout::space_of(&settings) {
                let named = format!("{e:#}").contains(&settings.space_name);
                if common::exit::code_of(&e) != common::exit::BAD_INPUT || !named {
                    return Err(format!(
                        "the space in sweep.yaml refused without exit 2 or its name: {e:#}"
                    ));
                }
            }
        }
        Err(e) => refused_well(&e)?,
    }
    check(parse::<common::wire::sweep::SlurmJobs>(NAME, &i.text))?;
    check(parse::<train::TrainSummary>(NAME, &i.text))?;
    check(parse::<train::ChainState>(NAME, &i.text))?;
    check(train::EpochRow::read_all(NAME, &i.text))
}

/// A program's output as supervise's readers take it: every line through a
/// reader (with no regex, and with the first line as `metric.regex`, which
/// compiles and has one group or is refused with exit 2 naming the metric),
/// and the bytes as an appended metrics.csv, whole and in pieces. Each
/// metric's steps only increase; the pieces read as the whole.
pub fn readers(data: &[u8]) -> Result<(), String> {
    use supervise::readers::{CsvRows, Reader, Report};
    let text = String::from_utf8_lossy(data);
    let pattern = text.lines().next().unwrap_or("");
    let mut readers = vec![Reader::new(NAME, None).map_err(|e| format!("{e:#}"))?];
    match Reader::new(NAME, Some(pattern)) {
        Ok(r) => readers.push(r),
        Err(e) => refused_well(&e)?,
    }
    for mut reader in readers {
        let reports: Vec<Report> = text.split('\n').flat_map(|l| reader.line(l)).collect();
        increasing(&reports)?;
    }
    let whole = CsvRows::new().push(data);
    increasing(&whole)?;
    let mut rows = CsvRows::new();
    let mut pieces = Vec::new();
    for piece in data.chunks(7) {
        pieces.extend(rows.push(piece));
    }
    let same = |a: &[Report], b: &[Report]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.metric == y.metric
                    && x.step == y.step
                    && (x.value == y.value || (x.value.is_nan() && y.value.is_nan()))
            })
    };
    if !same(&whole, &pieces) {
        return Err("metrics.csv read in pieces differs from read whole".into());
    }
    Ok(())
}

fn increasing(reports: &[supervise::readers::Report]) -> Result<(), String> {
    let mut last = std::collections::HashMap::new();
    for r in reports {
        if let Some(prev) = last.insert(r.metric.as_str().to_string(), r.step) {
            if r.step <= prev {
                return Err(format!("{}: step {} after {prev}", r.metric, r.step));
            }
        }
    }
    Ok(())
}

/// A sweep's `command` and its parameters: a JSON object `{"command":
/// [...], "params": {...}}` when the bytes are one, else the lines as the
/// command's items with fixed parameters. Expanded with and without a
/// config: the argv, or a refusal that exits 2 and names the command; an
/// argv keeps no item that is one whole macro.
pub fn command(data: &[u8]) -> Result<(), String> {
    use serde_json::{json, Value};
    use supervise::command::{expand, Context};
    let parsed: Option<Value> = serde_json::from_slice(data).ok();
    let (items, params): (Vec<String>, Vec<(String, Value)>) = match parsed {
        Some(Value::Object(o)) => (
            o.get("command")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
                        .collect()
                })
                .unwrap_or_default(),
            o.get("params")
                .and_then(Value::as_object)
                .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        ),
        _ => (
            String::from_utf8_lossy(data)
                .split('\n')
                .map(String::from)
                .collect(),
            vec![
                ("lr".into(), json!(0.001)),
                ("amp".into(), json!(true)),
                ("name".into(), json!("a b")),
                ("layers".into(), json!([1, {"k": null}])),
            ],
        ),
    };
    let env = |name: &str| (name == "SET").then(|| "${args}".to_string());
    for config in [None, Some("trial/config.yaml")] {
        let ctx = Context {
            params: &params,
            program: "train.py",
            interpreter: "python",
            args_json_file: "trial/params.json",
            config,
            env: &env,
        };
        match expand(Some(&items), &ctx) {
            Ok(argv) => {
                if let Some(m) = argv.iter().find(|a| {
                    a.starts_with("${")
                        && a.ends_with('}')
                        && !params.iter().any(|(_, v)| v.to_string().contains("${"))
                }) {
                    return Err(format!("{m} left unexpanded"));
                }
            }
            Err(e) => {
                let code = common::exit::code_of(&e);
                let message = format!("{e:#}");
                if code != common::exit::BAD_INPUT || !message.starts_with("command: ") {
                    return Err(format!(
                        "exit {code}, not 2, or not naming the command: {message}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A supervised command's last output lines (the bytes' lines; the first
/// byte picks the exit: code, signal or a stop): the verdict is said
/// without a panic, its evidence within its bound, a class exactly when it
/// did not finish.
pub fn verdict(data: &[u8]) -> Result<(), String> {
    use supervise::verdict::{judge, End, Status, Stop, EVIDENCE_CHARS};
    let text = String::from_utf8_lossy(data);
    let tail: Vec<String> = text.lines().map(String::from).collect();
    let pick = data.first().copied().unwrap_or(0);
    let stop = match pick % 7 {
        4 => Some(Stop::Timeout { limit_s: 3.0 }),
        5 => Some(Stop::Interrupted("stopped".into())),
        6 => Some(Stop::Pruned("pruned".into())),
        _ => None,
    };
    let (code, signal) = match pick % 4 {
        0 => (Some(0), None),
        1 => (Some(i32::from(pick)), None),
        2 => (None, Some(9)),
        _ => (None, Some(i32::from(pick % 31) + 1)),
    };
    let non_finite = (pick % 3 == 0).then_some("val_loss NaN at step 1");
    let v = judge(&End {
        code,
        signal,
        stop: stop.as_ref(),
        tail: &tail,
        non_finite,
        reports: tail.len(),
        oom_killed: (pick % 5 == 0).then_some("memory.oom_control: oom_kill 0 -> 1"),
    });
    if v.evidence.chars().count() > EVIDENCE_CHARS {
        return Err(format!("evidence of {} chars", v.evidence.chars().count()));
    }
    let ended_well = matches!(v.status, Status::Finished | Status::Pruned);
    if ended_well == v.class.is_some() {
        return Err(format!("{:?} with class {:?}", v.status, v.class));
    }
    Ok(())
}

/// Any config cfgcheck reads (`diagnose::any_config`: trainguard's, Hugging
/// Face's, Axolotl's, any nesting), as a `.yaml` and a `.json` file,
/// recognised and read as each foreign format, on a small host with no GPU
/// (so that every key rule and its fix runs): checked and fixed, or refused
/// with exit 2 naming the file. A fix reads back (`any_config::fix` checks
/// it) or says why it cannot be made; it never changes a file's length by
/// more than its changes could.
pub fn any_config(data: &[u8]) -> Result<(), String> {
    use diagnose::any_config::{self, Format};
    let text = match input(data) {
        Ok(i) => i.text,
        Err(r) => return r,
    };
    let env = |_: &str| None;
    let target = diagnose::rules::Target {
        gpu: None,
        known_no_gpu: true,
        host_ram_mib: Some(8 * 1024),
        margin: 0.10,
        env: &env,
    };
    for name in [format!("{NAME}.yaml"), format!("{NAME}.json")] {
        let i = Input {
            name,
            text: text.clone(),
        };
        for named in [
            None,
            Some(Format::Hf),
            Some(Format::Axolotl),
            Some(Format::Generic),
        ] {
            check(any_config::check(&i, named, &target))?;
            match any_config::fix(&i, named, &target) {
                Ok(Ok(fixed)) if fixed.changes.is_empty() && fixed.text != i.text => {
                    return Err("a fix without changes changed the text".into())
                }
                Ok(_) => {}
                Err(e) => refused_well(&e)?,
            }
        }
    }
    Ok(())
}

/// A Python file as `cfgcheck --scan` reads it: facts or "not parsed",
/// never a panic; parsed only when it is UTF-8; every line it names inside
/// the file, every column inside its line; the judge over it gives evidence for every finding and counts
/// that add up.
pub fn scan(data: &[u8]) -> Result<(), String> {
    use diagnose::scan::{judge, parser, FileScan, Scanned};
    let mut parser = parser().map_err(|e| format!("{e:#}"))?;
    let lines = data.split(|b| *b == b'\n').count();
    let in_file = |line: usize| (1..=lines).contains(&line);
    let result = diagnose::scan::scan(&mut parser, data);
    match &result {
        FileScan::Parsed(facts) => {
            if std::str::from_utf8(data).is_err() {
                return Err("bytes that are not UTF-8 were parsed".into());
            }
            if let Some(f) = facts.iter().find(|f| !in_file(site(f).line)) {
                return Err(format!("a fact outside the file's {lines} lines: {f:?}"));
            }
            // The column counts characters of its line, from 1.
            let text = String::from_utf8_lossy(data);
            let chars = |l: usize| text.split('\n').nth(l - 1).map_or(0, |s| s.chars().count());
            if let Some(f) = facts.iter().find(|f| {
                let at = site(f);
                at.col == 0 || at.col > chars(at.line) + 1
            }) {
                return Err(format!("a fact's column outside its line: {f:?}"));
            }
        }
        FileScan::NotParsed { line, reason } => {
            if reason.is_empty() || line.is_some_and(|l| !in_file(l)) {
                return Err(format!(
                    "not parsed at line {line:?} of {lines}: {reason:?}"
                ));
            }
        }
    }
    let scanned = [Scanned {
        file: NAME.into(),
        scan: result,
    }];
    for ram in [None, Some(4 * 1024), Some(64 * 1024)] {
        let out = judge(vec![NAME.into()], &scanned, ram);
        if out.findings.iter().any(|f| f.evidence.is_empty()) {
            return Err("a finding without evidence".into());
        }
        if out.files.scanned != 1 || out.files.parsed + out.files.not_parsed != 1 {
            return Err(format!("counts: {:?}", out.files));
        }
    }
    Ok(())
}

fn site(f: &diagnose::scan::Fact) -> &diagnose::scan::Site {
    use diagnose::scan::Fact::*;
    match f {
        CudaGraphs { at, .. }
        | CompileUnknown { at, .. }
        | Checkpointing { at, .. }
        | CheckpointingUnknown { at, .. }
        | Workers { at, .. }
        | WorkersUnknown { at, .. }
        | LaunchBlocking { at, .. }
        | Compiled { at, .. }
        | CheckpointedTwice { at, .. } => at,
    }
}
