//! The wheel's `verify-fixes`: the tool's library, as its own binary runs it.

fn main() -> std::process::ExitCode {
    verify_fixes::main()
}
