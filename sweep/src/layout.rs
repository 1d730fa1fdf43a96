//! The layout of a sweep's directory as the driver, `--report`, `--status`
//! and a worker read it: its settings (sweep-settings/v1, the file names
//! are `common::wire::run_dir::SweepDir`'s), the space they were started
//! with (a `bayes` one in the TPE variant it started with), and whether its
//! filesystem is full.

use crate::sampler::TpeVariant;
use crate::space::{Method, Space};
use common::bad_input;
use common::wire::run_dir::SweepDir;
use common::wire::sweep::Settings;
use std::path::Path;

/// The sweep's space, parsed from the text it was started with, a `bayes`
/// method in the variant recorded at the start (see [`recorded_variant`]).
pub fn space_of(settings: &Settings) -> anyhow::Result<crate::space::Parsed> {
    let mut parsed = Space::parse(
        &common::input::Input {
            name: settings.space_name.clone(),
            text: settings.space_text.clone(),
        },
        &settings.base,
    )?;
    if let Method::Bayes(v) = &mut parsed.space.method {
        *v = recorded_variant(settings)?;
    }
    Ok(parsed)
}

/// What a `bayes` sweep's sweep.yaml records as its TPE at the start
/// (`new_settings` writes it): absent in sweeps from before the record,
/// which ran the univariate TPE, the only one then.
pub fn recorded_variant(settings: &Settings) -> anyhow::Result<TpeVariant> {
    match settings.bayes_variant.as_deref() {
        None => Ok(TpeVariant::Univariate),
        Some(name) => TpeVariant::parse(name).ok_or_else(|| {
            bad_input!(
                "sweep.yaml: `bayes_variant`: expected {}, found {name:?} (the TPE the sweep started with; without the line it resumes univariate)",
                TpeVariant::NAMES.join(" or ")
            )
        }),
    }
}

pub fn read_settings(dir: &Path) -> anyhow::Result<Settings> {
    let input = common::input::read(&SweepDir::new(dir).settings())?;
    common::wire::parse(&input.name, &input.text)
}

/// Under this many free bytes the sweep's filesystem counts as full.
const FULL_BELOW: u64 = 1 << 20;

/// "the filesystem of DIR is full (N bytes free)", if it is.
pub fn full_disk(dir: &Path) -> Option<String> {
    let free = common::host::free_bytes(dir)?;
    (free < FULL_BELOW).then(|| {
        format!(
            "the filesystem of {} is full ({free} bytes free)",
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::wire::Versioned;

    fn settings(space: &str, recorded: Option<&str>) -> Settings {
        Settings {
            space_text: format!(
                "{space}metric: {{name: val_loss}}\nparameters:\n  learning_rate: {{min: 0.0001, max: 0.01}}\n"
            ),
            bayes_variant: recorded.map(String::from),
            ..Settings::example()
        }
    }

    fn variant(space: &str, recorded: Option<&str>) -> Method {
        space_of(&settings(space, recorded)).unwrap().space.method
    }

    #[test]
    fn a_resumed_bayes_sweep_keeps_the_variant_it_started_with() {
        let (multi, uni) = (
            Method::Bayes(TpeVariant::Multivariate),
            Method::Bayes(TpeVariant::Univariate),
        );
        // Recorded at the start: kept whatever today's default.
        assert_eq!(variant("method: bayes\n", Some("multivariate")), multi);
        assert_eq!(variant("method: bayes\n", Some("univariate")), uni);
        // No record: a sweep from before the variants, univariate then.
        assert_eq!(variant("method: bayes\n", None), uni);
        assert_eq!(variant("method: random\n", None), Method::Random);
        let e = space_of(&settings("method: bayes\n", Some("both"))).unwrap_err();
        assert!(
            format!("{e:#}")
                .contains("`bayes_variant`: expected multivariate or univariate, found \"both\""),
            "{e:#}"
        );
    }

    #[test]
    fn a_new_sweep_records_its_variant() {
        let started = |space: &str| {
            crate::start::started_variant(&settings(space, None))
                .unwrap()
                .map(TpeVariant::as_str)
        };
        assert_eq!(started("method: bayes\n"), Some("multivariate"));
        assert_eq!(
            started("method: bayes\nbayes: {variant: univariate}\n"),
            Some("univariate")
        );
        assert_eq!(started("method: grid\n"), None);
        // What is recorded is what a resume reads back.
        let mut s = settings("method: bayes\n", None);
        s.bayes_variant = crate::start::started_variant(&s)
            .unwrap()
            .map(|v| v.as_str().into());
        assert_eq!(
            space_of(&s).unwrap().space.method,
            Method::Bayes(TpeVariant::Multivariate)
        );
    }
}
