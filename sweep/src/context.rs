//! What every step of a sweep's driver reads and none changes: the sweep's
//! directory, settings and space, what the sampler draws from, the study's
//! id, the binary trials of our model run, the interpreter's torch, this
//! worker's identity, and the preload server its Python trials fork from.

use crate::journal::{Study, StudyId};
use crate::sampler::SearchSpace;
use crate::space::Space;
use crate::storage::Storage;
use anyhow::Context as _;
use common::wire::run_dir::{SweepDir, TrialDir};
use common::wire::sweep::Settings;
use serde_json::Value;
use std::path::PathBuf;

pub(crate) struct Sweep {
    pub dir: PathBuf,
    /// The `train` a trial of our model runs.
    pub train: PathBuf,
    pub settings: Settings,
    pub space: Space,
    /// What the sampler draws from (the space's sampled and fixed values).
    pub search: SearchSpace,
    pub study_id: StudyId,
    /// A program sweep interpreter's torch (which allocator variable).
    pub torch: supervise::env::TorchVersion,
    /// This worker (`Owner::this`), read once: each trial records it, and
    /// a claim should not read /proc under the storage's lock.
    pub owner: Value,
    /// The preload server Python trials are forked from, if any.
    pub preload: Option<crate::program::Preloaded>,
}

impl Sweep {
    pub fn trial_dir(&self, number: u64) -> TrialDir {
        SweepDir::new(&self.dir).trial(number)
    }

    /// The study as it stands in `storage`.
    pub fn study(&self, storage: &dyn Storage) -> anyhow::Result<Study> {
        storage
            .load(&self.settings.study_name)?
            .with_context(|| format!("{}: the study is gone", storage.describe()))
    }
}
