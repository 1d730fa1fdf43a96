//! The subcommands besides training itself: `train info`, `train bench`,
//! `train check-data`.

pub mod bench;
pub mod check_data;
pub mod info;
