//! The configs `--space` sizes memory for: a sweep space's corners, or the
//! deprecated space/v1's every combination.

use common::config::Config;
use common::wire::space::Space;
use common::wire::{self, Versioned};
use common::{bad_input, input};
use std::path::Path;

const MAX_VARIANTS: usize = 10_000;

/// The configs to size memory for: a sweep space (W&B sweep YAML, the one
/// space format of the toolkit: train sweep's) at its corners, or the older
/// space/v1 (`parameters: {key: [values...]}`), read as a deprecated alias
/// with every combination.
pub fn space_variants(base: &Config, path: &Path) -> anyhow::Result<Vec<(String, Config)>> {
    let input = input::read(path)?;
    if wire::check_schema(&input.name, &input.text, Space::SCHEMA).is_err() {
        let parsed = sweep::space::Space::parse(&input, base)?;
        for w in &parsed.warnings {
            common::say!("verify-fixes: {}: {w}", input.name);
        }
        let corners = parsed.space.corners(base);
        if corners.is_empty() {
            return Err(bad_input!(
                "{}: no combination of the space's ends is a valid config",
                input.name
            ));
        }
        return Ok(corners);
    }
    common::say!(
        "verify-fixes: {}: space/v1 is deprecated: write the space as a sweep space (see docs/guide/sweeps.md, \"The search space: W&B's sweep YAML\"), which train sweep reads too",
        input.name
    );
    let name = &input.name;
    let space = wire::parse::<Space>(name, &input.text)?;
    let params = &space.parameters;
    let mut variants: Vec<(Vec<String>, serde_yaml::Value)> =
        vec![(Vec::new(), serde_yaml::to_value(base)?)];
    for (k, values) in params {
        let key = k
            .as_str()
            .ok_or_else(|| bad_input!("{name}: `parameters`: keys must be strings"))?;
        let list = values
            .as_sequence()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| {
                bad_input!("{name}: `parameters.{key}`: expected a non-empty list of values")
            })?;
        if variants.len() * list.len() > MAX_VARIANTS {
            return Err(bad_input!("{name}: more than {MAX_VARIANTS} combinations"));
        }
        let mut next = Vec::new();
        for (label, cfg) in &variants {
            for value in list {
                let mut cfg = cfg.clone();
                let mut slot = &mut cfg;
                for part in key.split('.') {
                    slot = slot
                        .as_mapping_mut()
                        .and_then(|m| m.get_mut(part))
                        .ok_or_else(|| {
                            bad_input!("{name}: `parameters.{key}`: not a config key")
                        })?;
                }
                *slot = value.clone();
                let mut label = label.clone();
                label.push(format!(
                    "{key}={}",
                    serde_yaml::to_string(value).unwrap_or_default().trim()
                ));
                next.push((label, cfg));
            }
        }
        variants = next;
    }
    variants
        .into_iter()
        .map(|(label, v)| {
            let c: Config = serde_yaml::from_value(v)
                .map_err(|e| bad_input!("{name}: {}: {e}", label.join(", ")))?;
            if let Some((key, msg)) = c.validate().into_iter().next() {
                return Err(bad_input!("{name}: {}: `{key}`: {msg}", label.join(", ")));
            }
            Ok((label.join(", "), c))
        })
        .collect()
}
