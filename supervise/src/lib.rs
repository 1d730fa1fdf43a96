//! trainguard's supervisor of any training command (issue 23). Pure parts:
//! the metric reports read from a program's output and its metrics.csv
//! (`readers`), W&B's sweep command macros (`command`), the environment
//! fixes (`env`), the fix's knobs in a command's own flags (`knobs`, which
//! reads the program's `--help`). The process side: `child` is the one way a command is
//! run (its own process group, its keeper from `group`, its processes
//! outside the group from `lineage`, its output read as
//! it comes; forked from a `preload` server when one fits: one Python
//! process that imported torch once), `leg` a command with its memory and
//! verdict, and `events` what wakes a supervisor's loop (a bell, the stop
//! request).

pub mod autofix;
pub mod child;
pub mod command;
pub mod device;
pub mod env;
pub mod events;
pub mod group;
pub mod hang;
pub mod knobs;
pub mod launcher;
pub mod leg;
pub mod lineage;
pub mod memory;
pub mod oom_kills;
pub mod plotting;
pub mod preload;
pub mod readers;
pub mod verdict;
