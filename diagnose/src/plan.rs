//! A plan of config changes, as `cfgcheck --fix` and `--fit` make it: each
//! change with its key, its new YAML value and why; what no config change
//! can fix; and the config once the changes are made. Each hazard's fix adds
//! to it (`hazards::Hazard::fix`); `fix` runs them and applies the plan.

use common::wire::config::Config;

#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub key: String,
    /// The new value as YAML text.
    pub value: String,
    pub why: String,
}

#[derive(Debug, Default)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Problems no config change can solve, each said plainly.
    pub unfixable: Vec<String>,
    /// The config once the changes are made.
    pub config: Config,
}

/// A plan being made: each hazard's fix reads `config` (the config with the
/// changes so far) and adds its changes.
pub struct Planner {
    pub config: Config,
    pub plan: Plan,
}

impl Planner {
    pub(crate) fn new(c: &Config) -> Planner {
        Planner {
            config: c.clone(),
            plan: Plan::default(),
        }
    }

    pub(crate) fn finish(mut self) -> Plan {
        self.plan.config = self.config;
        self.plan
    }

    /// Records a change of `key` to `value` (YAML text), made on the config
    /// by `apply`.
    pub fn change(
        &mut self,
        key: &str,
        value: String,
        why: String,
        apply: impl FnOnce(&mut Config),
    ) {
        apply(&mut self.config);
        self.plan.changes.push(Change {
            key: key.to_string(),
            value,
            why,
        });
    }
}
