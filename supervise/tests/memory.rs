//! The memory sampler on real processes: Python children holding known
//! amounts of touched host memory, alone, as a tree, and sharing pages.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use supervise::memory::{self, Sampler};

/// A shell running `script` in a process group of its own.
fn holder(script: &str) -> Child {
    Command::new("sh")
        .args(["-c", script])
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

use std::os::unix::process::CommandExt;

/// A python3 that touches `mib` MiB (forking after it if `fork`), then
/// creates `ready` (each process of it once it holds them) and sleeps.
fn hold(mib: u32, ready: &Path, fork: bool) -> String {
    let fork = if fork { "os.fork(); " } else { "" };
    format!(
        "python3 -c \"import os, time; b = bytearray(b'\\x01') * ({mib} << 20); {fork}open('{}.%d' % os.getpid(), 'w').close(); time.sleep(60)\"",
        ready.display()
    )
}

/// Waits until `n` processes have created their `ready` file.
fn ready(ready: &Path, n: usize) {
    let (dir, name) = (ready.parent().unwrap(), ready.file_name().unwrap());
    let name = name.to_str().unwrap();
    testkit::wait_until("the holders to hold their memory", 60, || {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                let e = e.as_ref().unwrap().file_name();
                e.to_str().unwrap().starts_with(&format!("{name}."))
            })
            .count()
            >= n
    });
}

/// The sampler's peaks of `pid`'s tree, once it has taken `n` samples.
fn sampled(pid: u32, csv: &Path, n: u64) -> memory::Peaks {
    let s = Sampler::start(pid, csv, Duration::from_millis(100)).unwrap();
    testkit::wait_until("the sampler's samples", 60, || s.peaks().samples >= n);
    s.finish()
}

fn end(mut c: Child) {
    // SAFETY: signals to the group we started.
    unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
    let _ = c.wait();
}

#[test]
fn a_tree_is_summed_and_shared_pages_count_once_in_pss() {
    let tmp = tempfile::tempdir().unwrap();
    let r = tmp.path().join("two");
    // Two holders of 150 MiB under one shell.
    let (a, b) = (hold(150, &r, false), hold(150, &r, false));
    let two = holder(&format!("{a} & {b} & wait"));
    ready(&r, 2);
    let p = sampled(two.id(), &tmp.path().join("m.csv"), 3);
    end(two);
    assert!(p.processes >= 3, "{p:?}");
    assert!(p.host_pss_mib > 300.0 && p.host_pss_mib < 360.0, "{p:?}");
    // One holder that forks after touching: the child shares the pages.
    let r = tmp.path().join("forked");
    let forked = holder(&hold(200, &r, true));
    ready(&r, 2);
    let p = sampled(forked.id(), &tmp.path().join("f.csv"), 3);
    end(forked);
    assert!(
        p.host_rss_mib > 400.0,
        "RSS counts the shared pages twice: {p:?}"
    );
    assert!(
        p.host_pss_mib > 200.0 && p.host_pss_mib < 250.0,
        "PSS once: {p:?}"
    );
    assert!(
        p.gpu_mib.is_none()
            && p.gpu_note
                .as_deref()
                .unwrap_or("")
                .contains("not available"),
        "{p:?}"
    );
}

#[test]
fn a_process_that_exits_is_sampled_to_its_end_and_the_csv_and_plot_are_written() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("memory.csv");
    // Holds 64 MiB until its stdin closes: it ends once the sampler has
    // seen it, however slow the machine.
    let mut short = Command::new("python3")
        .args([
            "-c",
            "import sys; b = bytearray(b'\\x01') * (64 << 20); sys.stdin.read()",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let s = Sampler::start(short.id(), &csv, Duration::from_millis(100)).unwrap();
    testkit::wait_until("the sampler to see 64 MiB", 60, || {
        let p = s.peaks();
        p.samples >= 3 && p.host_pss_mib > 60.0
    });
    drop(short.stdin.take());
    short.wait().unwrap();
    let p = s.finish();
    assert!(p.samples >= 3 && p.host_pss_mib > 60.0, "{p:?}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with(memory::HEADER), "{text}");
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<csv::StringRecord> = r.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len() as u64, p.samples);
    assert!(rows.iter().all(|r| r[4].is_empty()), "no GPU, no gpu_mib");
    let png = tmp.path().join("memory.png");
    memory::plot(&csv, &[(0.2, 1), (0.4, 2)], Some(0.1), "val_loss", &png).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
}

/// memory.png's start-up ends at the command's first output line: a real
/// Python process quiet for a second, then printing (no metric yet).
#[test]
fn a_commands_start_up_ends_at_its_first_output_line() {
    let tmp = tempfile::tempdir().unwrap();
    let (bell, wait) = supervise::events::bell();
    let spec = supervise::child::Spec {
        argv: [
            "python3",
            "-c",
            "import time; time.sleep(1.0); print('step 1 of 20', flush=True); time.sleep(1.0)",
        ]
        .map(String::from)
        .to_vec(),
        cwd: None,
        env: Vec::new(),
        log: tmp.path().join("output.log"),
        own_metrics: None,
        echo: false,
        grace: Duration::from_secs(1),
        bell,
        preload: None,
    };
    let mut child = supervise::child::Child::spawn(&spec, None).unwrap();
    let status = loop {
        child.poll();
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        wait.until(Some(std::time::Instant::now() + Duration::from_millis(200)));
    };
    assert!(status.success());
    let first = child.first_line().expect("its line was seen");
    let after = first.duration_since(child.started).as_secs_f64();
    let ended = child.started.elapsed().as_secs_f64();
    assert!(after > 0.9 && after < ended - 0.5, "{after} of {ended}");
}
