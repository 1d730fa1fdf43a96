//! The pure parts of trainguard's supervisor of any training command
//! (issue 23): the metric reports read from a program's output and its
//! metrics.csv (`readers`), and W&B's sweep command macros (`command`). The
//! process side (spawning, process groups, sampling memory) builds on these.

pub mod command;
pub mod readers;
