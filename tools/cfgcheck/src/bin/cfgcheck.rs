//! The `cfgcheck` binary: everything is in the library (src/lib.rs), which the pip
//! wheel's `cfgcheck` calls too (packaging/wheel).

fn main() -> std::process::ExitCode {
    cfgcheck::main()
}
