//! The subcommands besides training itself: `train info`, `train bench`,
//! `train check-data`.

#[cfg(feature = "libtorch")]
pub(crate) mod bench;
#[cfg(feature = "libtorch")]
pub(crate) mod check_data;
pub(crate) mod info;

/// In a train built without libtorch, the arguments of a command that needs
/// it (`train bench`, `train check-data`): any, since the command only says
/// it is not in this build (exit 5).
#[cfg(not(feature = "libtorch"))]
#[derive(clap::Args)]
#[command(
    after_help = "This train was built without libtorch (the pip wheel's): this command exits 5. \
                  docs/GUIDE.md, \"Install\" says how to build the full train."
)]
pub struct NotBuilt {
    #[arg(num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true, value_name = "ARGS")]
    _args: Vec<std::ffi::OsString>,
}
