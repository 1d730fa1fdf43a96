//! `train info` and the link fixes it depends on, checked on the real
//! binaries: `train-model` links libtorch (and keeps libtorch_cuda), `train`
//! links none of it.

use assert_cmd::Command;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_train");
const MODEL: &str = env!("CARGO_BIN_EXE_train-model");

/// Runs `train info` the way a user does: without the LD_LIBRARY_PATH that
/// cargo adds for tests, so the rpath alone must find libtorch.
fn info(format: &str) -> String {
    let out = Command::new(BIN)
        .args(["info", "--format", format])
        .env_remove("LD_LIBRARY_PATH")
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn yaml() -> serde_yaml::Value {
    serde_yaml::from_str(&info("yaml")).unwrap()
}

#[test]
fn info_reports_torch_and_devices() {
    let v = yaml();
    assert_eq!(v["schema"].as_str(), Some("train-info/v1"));
    assert_eq!(
        v["torch_version"].as_str(),
        Some(common::torch_for_train!()),
        concat!(
            "tch ",
            common::tch_version!(),
            " expects PyTorch ",
            common::torch_for_train!()
        )
    );
    let available = v["cuda_available"].as_bool().unwrap();
    let count = v["device_count"].as_i64().unwrap();
    let devices = v["devices"].as_sequence().unwrap();
    if available {
        assert!(count > 0);
        assert_eq!(
            devices.len() as i64,
            count,
            "libtorch and the driver see the same GPUs"
        );
        assert!(devices
            .iter()
            .all(|d| !d["name"].as_str().unwrap().is_empty()));
    } else {
        assert_eq!(count, 0);
        assert_eq!(v["cudnn_version"], serde_yaml::Value::Null);
        let notes = v["notes"].as_sequence().unwrap();
        assert!(!notes.is_empty(), "says why CUDA is unavailable");
    }
}

#[test]
fn json_matches_yaml() {
    let json: serde_json::Value = serde_json::from_str(&info("json")).unwrap();
    let yaml: serde_json::Value = serde_json::to_value(yaml()).unwrap();
    assert_eq!(json, yaml);
}

#[test]
fn libtorch_cuda_survives_as_needed() {
    let v = yaml();
    let dir = v["libtorch_dir"].as_str().unwrap();
    let cuda_lib = Path::new(dir).join("libtorch_cuda.so").exists();
    assert_eq!(v["cuda_build"].as_bool(), Some(cuda_lib));
    let ldd = std::process::Command::new("ldd")
        .arg(MODEL)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    assert!(
        !ldd.contains("not found"),
        "every library resolves through the rpath:\n{ldd}"
    );
    assert!(ldd.contains("libtorch_cpu.so"), "{ldd}");
    if cuda_lib {
        assert!(
            ldd.contains("libtorch_cuda.so"),
            "libtorch_cuda must be NEEDED:\n{ldd}"
        );
    }
}

#[test]
fn train_itself_links_no_libtorch() {
    // What the dynamic loader maps before main: libtorch's would cost
    // `train --version`, `train run` and every sweep command about half a
    // second (issue 32).
    let needed = |bin: &str| {
        let out = std::process::Command::new("readelf")
            .args(["-d", bin])
            .output()
            .expect("readelf (binutils) runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("(NEEDED)"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let train = needed(BIN);
    assert!(!train.is_empty(), "readelf read {BIN}");
    assert!(
        !train
            .iter()
            .any(|l| l.contains("torch") || l.contains("c10")),
        "train must not link libtorch:\n{}",
        train.join("\n")
    );
    assert!(
        needed(MODEL).iter().any(|l| l.contains("libtorch_cpu.so")),
        "train-model links it"
    );
}

#[test]
fn bad_usage_exits_2() {
    Command::new(BIN)
        .args(["info", "--format", "xml"])
        .assert()
        .code(2);
    Command::new(BIN).arg("fly").assert().code(2);
}

#[test]
fn libtorch_dir_is_the_library_the_process_loaded() {
    // The build's directory, seen through another directory of links: with
    // LD_LIBRARY_PATH pointing there, the loader takes the libraries from
    // it (train's rpath is a RUNPATH, searched after LD_LIBRARY_PATH), and
    // `train info` must say so rather than repeat the build-time path.
    let v = yaml();
    let built = Path::new(v["libtorch_dir"].as_str().unwrap()).to_path_buf();
    // site-packages/torch/lib mirrored as <tmp>/torch/lib, with <tmp>/nvidia
    // beside it: torch's libraries find CUDA's through $ORIGIN/../../nvidia.
    let tmp = tempfile::tempdir().unwrap();
    let site = built.parent().unwrap().parent().unwrap();
    let links = tmp.path().join("torch/lib");
    std::fs::create_dir_all(&links).unwrap();
    for e in std::fs::read_dir(&built).unwrap() {
        let e = e.unwrap();
        std::os::unix::fs::symlink(e.path(), links.join(e.file_name())).unwrap();
    }
    if site.join("nvidia").exists() {
        std::os::unix::fs::symlink(site.join("nvidia"), tmp.path().join("nvidia")).unwrap();
    }
    let out = Command::new(BIN)
        .args(["info", "--format", "yaml"])
        .env("LD_LIBRARY_PATH", &links)
        .assert()
        .success();
    let v: serde_yaml::Value = serde_yaml::from_slice(&out.get_output().stdout).unwrap();
    let seen = Path::new(v["libtorch_dir"].as_str().unwrap());
    assert_eq!(
        seen.canonicalize().unwrap(),
        links.canonicalize().unwrap(),
        "{v:?}"
    );
}
