//! The `verify-fixes` binary: everything is in the library (src/lib.rs), which the pip
//! wheel's `verify-fixes` calls too (packaging/wheel).

fn main() -> std::process::ExitCode {
    verify_fixes::main()
}
