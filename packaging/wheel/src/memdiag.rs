//! The wheel's `memdiag`: the tool's library, as its own binary runs it.

fn main() -> std::process::ExitCode {
    memdiag::main()
}
