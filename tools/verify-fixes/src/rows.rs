//! The checks of both forms by id: each one's name as printed, and the row
//! it reports. A check is one item of the gate: an id (what `--skip`
//! takes), a name, and its row (`Check`: status, what it saw, the fix). The
//! two forms share ids that check different things (config, memory, disk),
//! so a name belongs to a form and an id.

pub use common::wire::verify::{Check, Status};

/// Which form of the gate a check belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `verify-fixes --config CFG`: train's own run.
    Config,
    /// `verify-fixes -- CMD`: any command, by a short smoke run of it.
    Command,
}

/// The `--config` form's checks, in the order they are printed.
const CONFIG_FORM: [(&str, &str); 8] = [
    ("allocator", "allocator: expandable segments"),
    ("config", "config: cfgcheck rules"),
    ("memory", "memory: estimate × parallel trials fits"),
    ("runtime", "runtime: libtorch, CUDA, cuDNN"),
    ("gpu-state", "GPU state: health and other processes"),
    ("smoke", "smoke run: 2 short epochs, checkpoint round trip"),
    ("data", "data: opens, labels in range, no NaN or inf"),
    (
        "disk",
        "disk: output directory writable, room for checkpoints",
    ),
];

/// The `-- CMD` form's checks, in the order they are printed.
const COMMAND_FORM: [(&str, &str); 7] = [
    (
        "config",
        "config: cfgcheck on the config files in the command",
    ),
    ("allocator", "allocator: expandable segments"),
    ("gpu-state", "GPU state: health and other processes"),
    ("started", "command: starts and runs"),
    (
        "metric",
        "metric: read, by which reader, evaluated in time, finite",
    ),
    ("memory", "memory: measured peak, copies that fit"),
    ("disk", "disk: room for the run's output"),
];

impl Form {
    fn table(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Form::Config => &CONFIG_FORM,
            Form::Command => &COMMAND_FORM,
        }
    }

    /// The form's check ids, in the order they are printed.
    pub fn ids(self) -> Vec<&'static str> {
        self.table().iter().map(|(id, _)| *id).collect()
    }

    pub fn has(self, id: &str) -> bool {
        self.table().iter().any(|(i, _)| *i == id)
    }

    /// A check's name as printed; an id not of the form is its own name.
    pub fn name_of(self, id: &'static str) -> &'static str {
        self.table()
            .iter()
            .find(|(i, _)| *i == id)
            .map_or(id, |(_, name)| name)
    }

    /// The row a check reports.
    pub fn row(
        self,
        id: &'static str,
        status: Status,
        saw: impl Into<String>,
        fix: Option<String>,
    ) -> Check {
        Check {
            id: id.into(),
            name: self.name_of(id).into(),
            status,
            saw: saw.into(),
            fix,
        }
    }

    /// The row of a check left out with `--skip`.
    pub fn skipped_on_purpose(self, id: &'static str) -> Check {
        self.row(id, Status::Skip, "skipped on purpose (--skip)", None)
    }
}

/// Every check id of either form, for `--skip`: the config form's, then
/// the command form's own.
pub fn all_ids() -> Vec<&'static str> {
    let mut ids = Form::Config.ids();
    ids.extend(
        Form::Command
            .ids()
            .into_iter()
            .filter(|id| !Form::Config.has(id)),
    );
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_ids_name_each_forms_own_check() {
        assert_eq!(
            all_ids(),
            [
                "allocator",
                "config",
                "memory",
                "runtime",
                "gpu-state",
                "smoke",
                "data",
                "disk",
                "started",
                "metric"
            ]
        );
        assert_ne!(
            Form::Config.name_of("memory"),
            Form::Command.name_of("memory")
        );
        assert_eq!(
            Form::Config.name_of("gpu-state"),
            Form::Command.name_of("gpu-state")
        );
        assert!(!Form::Config.has("started"));
    }
}
