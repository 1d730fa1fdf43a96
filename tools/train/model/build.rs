//! Builds train-model against the libtorch that torch-sys found, so that it
//! runs without LD_LIBRARY_PATH and really loads CUDA:
//! - rustc links with `--as-needed`, which drops libtorch_cuda (nothing refers
//!   to it by symbol; it registers CUDA kernels from its constructors), so it
//!   is linked again under `--no-as-needed` (tch-rs issues #907, #980, #787);
//! - an rpath to the libtorch directory, so the binary finds it at run time;
//! - the C++ shim (shim/shim.cpp).
//!
//! torch-sys publishes that directory as DEP_TCH_LIBTORCH_LIB (its `links` key
//! is "tch"), which is why this crate depends on torch-sys directly.
//!
//! Link arguments apply only to the package whose build script prints them:
//! here to this crate's own tests; the `train-model` binary is tools/train's,
//! whose build.rs links it from what this one publishes (`cargo:libtorch_lib`,
//! `cargo:cuda`, read there as DEP_TRAIN_MODEL_*). `train` itself links none
//! of it (ARCHITECTURE.md, "Packaging").

// Shared with tools/train/build.rs, which links the `train-model` binary.
#[path = "link_args.rs"]
mod link_args;

use link_args::link_args;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link_args.rs");
    link_libtorch();
}

fn link_libtorch() {
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        println!(
            "cargo:warning=torch-sys did not report its libtorch directory; \
             train-model will need LD_LIBRARY_PATH to run"
        );
        println!("cargo:rustc-env=TRAIN_LIBTORCH_LIB=");
        println!("cargo:rustc-env=TRAIN_TORCH_VERSION=unknown");
        println!("cargo:rustc-env=TRAIN_CUDA_BUILD=0");
        println!("cargo:rustc-env=TRAIN_SHIM_CUDA=0");
        return;
    };
    let lib = Path::new(&lib);
    let cuda = lib.join("libtorch_cuda.so").exists();
    for arg in link_args(lib, cuda) {
        println!("cargo:rustc-link-arg={arg}");
    }
    // For tools/train's build.rs (DEP_TRAIN_MODEL_LIBTORCH_LIB, _CUDA).
    println!("cargo:libtorch_lib={}", lib.display());
    println!("cargo:cuda={}", u8::from(cuda));
    println!("cargo:rustc-env=TRAIN_LIBTORCH_LIB={}", lib.display());
    println!("cargo:rustc-env=TRAIN_CUDA_BUILD={}", u8::from(cuda));
    println!("cargo:rustc-env=TRAIN_TORCH_VERSION={}", torch_version(lib));
    build_shim(lib, cuda);
}

/// The C++ shim (shim/shim.cpp) over the allocator and autocast. The CUDA
/// allocator half needs the CUDA runtime headers: PyPI's wheels put them in
/// site-packages/nvidia/cu13/include (cuda_runtime_api.h from
/// nvidia-cuda-runtime, crt/ from nvidia-cuda-crt, which `just setup`
/// installs); TRAINGUARD_CUDA_INCLUDE names another directory. Without
/// them the shim is built without CUDA and says so at run time.
fn build_shim(lib: &Path, cuda: bool) {
    println!("cargo:rerun-if-changed=shim/shim.cpp");
    println!("cargo:rerun-if-env-changed=TRAINGUARD_CUDA_INCLUDE");
    let include = lib.join("../include");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("shim/shim.cpp")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-w")
        .define("_GLIBCXX_USE_CXX11_ABI", "1");
    let cuda_include = std::env::var("TRAINGUARD_CUDA_INCLUDE")
        .map(std::path::PathBuf::from)
        .ok()
        .or_else(|| {
            [
                "../../nvidia/cu13/include",
                "../../nvidia/cuda_runtime/include",
            ]
            .iter()
            .map(|p| lib.join(p))
            .find(|p| p.join("cuda_runtime_api.h").exists())
        });
    let cuda_include = cuda_include.filter(|p| p.join("crt/host_defines.h").exists());
    match (cuda, &cuda_include) {
        (true, Some(dir)) => {
            build.include(dir).define("TG_WITH_CUDA", None);
            println!("cargo:rustc-env=TRAIN_SHIM_CUDA=1");
        }
        (true, None) => {
            println!(
                "cargo:warning=CUDA runtime headers not found (pip install nvidia-cuda-crt, or set \
                 TRAINGUARD_CUDA_INCLUDE): train's GPU memory figures will say \"not available\""
            );
            println!("cargo:rustc-env=TRAIN_SHIM_CUDA=0");
        }
        (false, _) => println!("cargo:rustc-env=TRAIN_SHIM_CUDA=0"),
    }
    build.compile("trainguard_shim");
    // After the shim's archive (which `compile` just linked): a linker that
    // reads libraries in order, as GNU ld does, resolves the shim's c10_cuda
    // symbols only from a library named after it.
    if cuda && cuda_include.is_some() {
        println!("cargo:rustc-link-lib=c10_cuda");
    }
}

/// The version in the headers train is compiled against: PyPI's wheel and the
/// libtorch archives both keep `include/` beside `lib/`.
fn torch_version(lib: &Path) -> String {
    let header = lib.join("../include/torch/headeronly/version.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let Ok(text) = std::fs::read_to_string(&header) else {
        return "unknown".to_string();
    };
    let part = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("#define TORCH_VERSION_{name} ")))
            .map(|v| v.trim().to_string())
    };
    match (part("MAJOR"), part("MINOR"), part("PATCH")) {
        (Some(a), Some(b), Some(c)) => format!("{a}.{b}.{c}"),
        _ => "unknown".to_string(),
    }
}
