//! The subcommands besides training itself: `train info`'s libtorch part,
//! `train bench`, `train check-data`.

pub(crate) mod bench;
pub(crate) mod check_data;
pub(crate) mod info;
