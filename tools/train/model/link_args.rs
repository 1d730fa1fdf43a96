//! What a binary that runs libtorch is linked with, for both build scripts
//! that link one: tools/train/model/build.rs (this crate's tests) and
//! tools/train/build.rs (the `train-model` binary).

use std::path::Path;

/// An rpath to libtorch's directory, and libtorch_cuda kept under
/// `--no-as-needed` when it is a CUDA build.
pub fn link_args(lib: &Path, cuda: bool) -> Vec<String> {
    let mut args = vec![format!("-Wl,-rpath,{}", lib.display())];
    if cuda {
        args.extend(["-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,--as-needed"].map(String::from));
    }
    args
}
