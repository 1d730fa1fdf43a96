//! The wheel's `cfgcheck`: the tool's library, as its own binary runs it.

fn main() -> std::process::ExitCode {
    cfgcheck::main()
}
