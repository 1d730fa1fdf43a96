//! What the driver asks of the sweep's one truth, so that another storage
//! (a database shared by hosts) can stand where the journal file stands.
//! Every call is whole when it returns: its records are on disk (or
//! committed) before the driver takes the step that depends on them.

use crate::journal::{Journal, Outcome, Study, StudyId, TrialId, TrialRecord, TrialRef};
use crate::trial::Direction;
use anyhow::Result;
use serde_json::Value;

pub trait Storage {
    /// Where the truth is, for messages (the journal's path).
    fn describe(&self) -> String;
    /// The study named `name`, as it stands now (None: no such study).
    fn load(&self, name: &str) -> Result<Option<Study>>;
    /// Creates the study, or returns the id of the one of that name.
    fn create_study(&self, name: &str, direction: Direction) -> Result<StudyId>;
    /// Creates a RUNNING trial whose content `decide` computes from the
    /// study as it stands while no other worker can create one (None:
    /// nothing to create).
    fn claim_trial(
        &self,
        study: StudyId,
        decide: &mut dyn FnMut(&Study) -> Result<Option<TrialRecord>>,
    ) -> Result<Option<TrialRef>>;
    /// The metric at several steps of a running trial, read in one look.
    fn report(&self, trial: TrialId, values: &[(u64, f64)]) -> Result<()>;
    /// Ends a running trial with its last attributes, all or nothing.
    fn finish(&self, trial: TrialId, attrs: &[(String, Value)], outcome: Outcome) -> Result<()>;
    /// Stamps the heartbeats of this worker's running trials (a database's
    /// other workers fail a trial whose heartbeat stops; a journal has none).
    fn beat(&self, _running: &[TrialId]) -> Result<()> {
        Ok(())
    }
    /// How often `beat` is wanted (None: never).
    fn heartbeat_every(&self) -> Option<std::time::Duration> {
        None
    }
    /// Keeps what makes the next reader's start fast (a journal's replay
    /// checkpoint) when it is due; `at_end`: the sweep ends. Never fails
    /// the sweep.
    fn keep_checkpoint(&self, _at_end: bool) {}
}

impl Storage for Journal {
    fn describe(&self) -> String {
        self.path().display().to_string()
    }

    fn load(&self, name: &str) -> Result<Option<Study>> {
        Journal::load(self, name)
    }

    fn create_study(&self, name: &str, direction: Direction) -> Result<StudyId> {
        Journal::create_study(self, name, direction)
    }

    fn claim_trial(
        &self,
        study: StudyId,
        decide: &mut dyn FnMut(&Study) -> Result<Option<TrialRecord>>,
    ) -> Result<Option<TrialRef>> {
        Journal::claim_trial(self, study, decide)
    }

    fn report(&self, trial: TrialId, values: &[(u64, f64)]) -> Result<()> {
        self.set_intermediates(trial, values)
    }

    fn finish(&self, trial: TrialId, attrs: &[(String, Value)], outcome: Outcome) -> Result<()> {
        self.finish_with(trial, attrs, outcome)
    }

    fn keep_checkpoint(&self, at_end: bool) {
        Journal::keep_checkpoint(self, at_end)
    }
}
