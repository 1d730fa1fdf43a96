//! The `memdiag` binary: everything is in the library (src/lib.rs), which the pip
//! wheel's `memdiag` calls too (packaging/wheel).

fn main() -> std::process::ExitCode {
    memdiag::main()
}
