//! A test hook, documented in README: `TRAINGUARD_FAULT=sigkill@EPOCH:STEP`
//! makes train kill itself with SIGKILL just before step STEP of epoch EPOCH,
//! so tests can show what a real `kill -9` mid-epoch leaves behind and that
//! `--resume` recovers from it exactly.

pub const VAR: &str = "TRAINGUARD_FAULT";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub epoch: u32,
    pub step: u64,
}

impl Fault {
    pub fn from_env() -> anyhow::Result<Option<Fault>> {
        let Ok(v) = std::env::var(VAR) else {
            return Ok(None);
        };
        let parsed = v.strip_prefix("sigkill@").and_then(|rest| {
            let (e, s) = rest.split_once(':')?;
            Some(Fault {
                epoch: e.parse().ok()?,
                step: s.parse().ok()?,
            })
        });
        parsed
            .map(Some)
            .ok_or_else(|| common::bad_input!("{VAR}={v}: expected sigkill@EPOCH:STEP"))
    }

    /// Fires when the loop is about to run `step` (1-based) of `epoch`.
    pub fn check(&self, epoch: u32, step: u64) {
        if (epoch, step) == (self.epoch, self.step) {
            eprintln!("train: {VAR}: SIGKILL before epoch {epoch} step {step}");
            // SAFETY: raise has no preconditions; SIGKILL ends the process.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
    }
}
