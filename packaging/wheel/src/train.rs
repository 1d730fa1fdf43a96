//! The wheel's `train`: the tool's library, as its own binary runs it.

fn main() -> std::process::ExitCode {
    train::main()
}
