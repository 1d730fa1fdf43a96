//! What a leg's command runs with besides itself: the environment's known
//! fixes, a launcher's ranks tagged, and what the launcher's own restarts
//! mean for `--auto-fix`; each said once a run.

use common::wire::program::ProgramSummary;
use supervise::launcher;

/// How a launcher's own restarts combine with `--auto-fix`'s legs.
pub(super) fn say_restarts(command: &[String]) {
    if let Some((n, flag)) = launcher::restarts(command) {
        common::say!(
            "train run: the launcher's {flag} {n} runs a failed job again with the same settings, up to {n} times, before it ends; --auto-fix changes the settings only then, so a failure a setting causes happens {} times a leg ({flag} 0: fixed at the first)",
            n + 1
        );
    }
}

/// The known fixes for this command's environment, said once per run.
pub(super) fn fixes(argv: &[String], summary: &mut ProgramSummary) -> Vec<(String, String)> {
    let f = supervise::env::fixes_for_command(&|k| std::env::var(k).ok(), argv);
    if summary.env_set.is_empty() {
        for s in &f.said {
            common::say!("train run: {s}");
        }
    }
    summary.env_set = f.said;
    f.set
}

/// A launcher's job: its ranks' lines tagged where the launcher can tag
/// them (the command and environment it then runs with), and the summary's
/// account of the job; said once, at the first leg.
pub(super) fn ranks(
    argv: Vec<String>,
    mut env: Vec<(String, String)>,
    summary: &mut ProgramSummary,
) -> (Vec<String>, Vec<(String, String)>) {
    let get = |k: &str| std::env::var(k).ok();
    let Some(account) = launcher::account(&argv, &get) else {
        return (argv, env);
    };
    if summary.ranks.is_none() {
        common::say!(
            "train run: a job of ranks ({}, world size {}): lines {}",
            account.launcher,
            account.world_size,
            account.lines
        );
    }
    summary.ranks = Some(account);
    let argv = launcher::tag(argv, &mut env, &get);
    (argv, env)
}
