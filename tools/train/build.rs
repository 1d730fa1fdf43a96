//! Links the `train-model` binary, and only it, as a binary that runs
//! libtorch must be (model/link_args.rs: the rpath to libtorch, libtorch_cuda
//! kept under `--no-as-needed`). `cargo:rustc-link-arg` would reach every
//! binary of this package, `train` too; `-bin=train-model` reaches one.
//! train-model's build.rs found libtorch (through torch-sys) and publishes
//! its directory as DEP_TRAIN_MODEL_LIBTORCH_LIB.
//!
//! Without the `libtorch` feature (the wheel's train) there is nothing to
//! link: no train-model, no torch-sys, no Python asked for anything.

#[cfg(feature = "libtorch")]
#[path = "model/link_args.rs"]
mod link_args;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "libtorch")]
    link_train_model();
}

#[cfg(feature = "libtorch")]
fn link_train_model() {
    println!("cargo:rerun-if-changed=model/link_args.rs");
    // Absent when torch-sys reported no directory; train-model's build.rs
    // has warned then.
    let Ok(lib) = std::env::var("DEP_TRAIN_MODEL_LIBTORCH_LIB") else {
        return;
    };
    let cuda = std::env::var("DEP_TRAIN_MODEL_CUDA").as_deref() == Ok("1");
    for arg in link_args::link_args(std::path::Path::new(&lib), cuda) {
        println!("cargo:rustc-link-arg-bin=train-model={arg}");
    }
}
