//! The `train-model` binary: train's libtorch half (tools/train/model), which
//! `train` replaces itself with for the seeds' model. Declared in this
//! package so `cargo test -p train` builds it beside `train`.

fn main() -> std::process::ExitCode {
    train_model::main()
}
