//! The `train` binary: everything is in the library (lib.rs).

fn main() -> std::process::ExitCode {
    train::main()
}
