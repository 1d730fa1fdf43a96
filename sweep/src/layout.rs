//! The layout of a sweep's directory as the driver, `--report`, `--status`
//! and a worker read it: its settings (sweep-settings/v1, the file names
//! are `common::wire::run_dir::SweepDir`'s), the space they were started
//! with, and whether its filesystem is full.

use crate::space::Space;
use common::wire::run_dir::SweepDir;
use common::wire::sweep::Settings;
use std::path::Path;

/// The sweep's space, parsed from the text it was started with.
pub fn space_of(settings: &Settings) -> anyhow::Result<crate::space::Parsed> {
    Space::parse(
        &common::input::Input {
            name: settings.space_name.clone(),
            text: settings.space_text.clone(),
        },
        &settings.base,
    )
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
