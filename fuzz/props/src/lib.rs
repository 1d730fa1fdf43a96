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

/// A sweep's journal as `--resume` replays it.
pub fn journal(data: &[u8]) -> Result<(), String> {
    check(sweep::journal::replay(data, Path::new(NAME)))
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
            if let Err(e) = sweep::driver::space_of(&settings) {
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
