//! trainguard's supervisor of any training command (issue 23). Pure parts:
//! the metric reports read from a program's output and its metrics.csv
//! (`readers`), W&B's sweep command macros (`command`), the environment
//! fixes (`env`). The process side: `child` spawns a command in its own
//! process group and reads its output as it comes; `preload` forks Python
//! trials from one process that imported torch once.

pub mod child;
pub mod command;
pub mod env;
pub mod leg;
pub mod memory;
pub mod preload;
pub mod readers;
pub mod verdict;
