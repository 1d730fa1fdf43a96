//! The `train` binary: everything is in the library (lib.rs), which the pip
//! wheel's `train` calls too (packaging/wheel): the same code, without the
//! `train-model` binary beside it.

fn main() -> std::process::ExitCode {
    train::main()
}
