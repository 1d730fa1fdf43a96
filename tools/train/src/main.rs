//! The `train` binary: everything is in the library (lib.rs), which the pip
//! wheel's `train` (built without libtorch) calls too (packaging/wheel).

fn main() -> std::process::ExitCode {
    train::main()
}
