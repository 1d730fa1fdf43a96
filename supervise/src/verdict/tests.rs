//! The verdict as a table. Outputs the CPU can produce were recorded from
//! real runs (supervise/tests/data/outputs/README.md says how); the GPU's
//! (CUDA out of memory, fragmentation, device-side assert, CUDA-graph
//! replay) cannot happen here and are the messages quoted in
//! diagnose/src/failures.rs, from the seeds and the shipped libraries.

use super::*;

fn recorded(name: &str) -> Vec<String> {
    let path = format!(
        "{}/tests/data/outputs/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(String::from)
        .collect()
}

fn quoted(text: &str) -> Vec<String> {
    let mut lines = vec![
        "Traceback (most recent call last):".to_string(),
        "  File \"main.py\", line 88, in <module>".into(),
    ];
    lines.extend(text.lines().map(String::from));
    lines
}

struct Case {
    name: &'static str,
    tail: Vec<String>,
    code: Option<i32>,
    signal: Option<i32>,
    stop: Option<Stop>,
    non_finite: Option<&'static str>,
    status: Status,
    class: Option<Class>,
    known: Option<&'static str>,
    evidence: &'static str,
}

fn case(name: &'static str, tail: Vec<String>, code: Option<i32>, signal: Option<i32>) -> Case {
    Case {
        name,
        tail,
        code,
        signal,
        stop: None,
        non_finite: None,
        status: Status::Failed,
        class: None,
        known: None,
        evidence: "",
    }
}

const OOM: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 320.00 MiB. GPU 0 has a total capacity of 31.37 GiB of which 80.69 MiB is free. Including non-PyTorch memory, this process has 31.28 GiB memory in use. Of the allocated memory 30.76 GiB is allocated by PyTorch, and 33.46 MiB is reserved by PyTorch but unallocated.";
const OOM_FRAGMENTED: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 364.31 MiB is free. Process 175356 has 77.26 GiB memory in use. Of the allocated memory 72.12 GiB is allocated by PyTorch, and 3.78 GiB is reserved by PyTorch but unallocated.";
const GRAPH: &str = "RuntimeError: static input data pointer changed.\ninput name: primals_1. data pointer changed from 12919305216 to 12919242752.";
const GRAPH_OVERWRITTEN: &str = "RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run.";
const ASSERT: &str = "/pytorch/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\ntorch.AcceleratorError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.";
// pytorch#188008 (torch 2.14.0): the failed mapping's OOM, then the same
// assert on every later allocation, in unrelated code.
const ALLOCATOR_BROKEN: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 320.00 MiB. GPU 0 has a total capacity of 31.37 GiB of which 80.69 MiB is free.\nepoch 2 step 40\nRuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at \"c10/cuda/CUDACachingAllocator.cpp\":487, please report a bug to PyTorch.";

fn table() -> Vec<Case> {
    vec![
        Case { status: Status::Finished, evidence: "exited 0", ..case("clean exit", vec!["Epoch 1/1 | Val Loss: 0.5".into()], Some(0), None) },
        Case { class: Some(Class::NonFiniteLoss), known: Some("non-finite-loss"), non_finite: Some("val_loss NaN at step 1"), evidence: "it exited 0, but reported val_loss NaN at step 1", ..case("cpu-nan (recorded)", recorded("cpu-nan"), Some(0), None) },
        Case { class: Some(Class::LabelOutOfRange), known: Some("label-out-of-range"), evidence: "IndexError: Target 5 is out of bounds. (exit 1)", ..case("cpu-label (recorded)", recorded("cpu-label"), Some(1), None) },
        Case { class: Some(Class::OutOfMemory), known: Some("host-out-of-memory"), evidence: "DefaultCPUAllocator: can't allocate memory", ..case("cpu-oom (recorded)", recorded("cpu-oom"), Some(1), None) },
        Case { class: Some(Class::OutOfMemory), known: Some("host-out-of-memory"), evidence: "MemoryError (exit 1)", ..case("cpu-memoryerror (recorded)", recorded("cpu-memoryerror"), Some(1), None) },
        Case { class: Some(Class::Other), evidence: "ValueError: the data ran out at batch 7 (exit 1)", ..case("cpu-traceback (recorded)", recorded("cpu-traceback"), Some(1), None) },
        Case { class: Some(Class::Killed), known: Some("killed"), evidence: "the kernel's OOM killer is the usual cause", ..case("SIGKILL, no message (seed 002)", vec!["Epoch 1/9 | Val Loss: 1.0".into()], None, Some(9)) },
        Case { class: Some(Class::Killed), evidence: "killed by SIGSEGV with no known message; its last line: step 3", ..case("SIGSEGV", vec!["step 3".into()], None, Some(11)) },
        Case { class: Some(Class::Other), evidence: "exit 3 with no output", ..case("silent exit", vec![], Some(3), None) },
        Case { class: Some(Class::OutOfMemory), known: Some("memory-exceeds-free"), evidence: "Tried to allocate 320.00 MiB", ..case("CUDA OOM (quoted)", quoted(OOM), Some(1), None) },
        Case { class: Some(Class::OutOfMemory), known: Some("allocator-fragmentation"), evidence: "3.78 GiB is reserved by PyTorch but unallocated", ..case("CUDA OOM, fragmented (quoted)", quoted(OOM_FRAGMENTED), Some(1), None) },
        Case { class: Some(Class::CudaGraphPointer), known: Some("cuda-graphs-checkpointing"), evidence: "static input data pointer changed", ..case("CUDA graphs (quoted, seed 001)", quoted(GRAPH), Some(1), None) },
        Case { class: Some(Class::CudaGraphPointer), known: Some("cuda-graphs-checkpointing"), evidence: "overwritten by a subsequent run", ..case("CUDA graphs overwritten (quoted, seed 000)", quoted(GRAPH_OVERWRITTEN), Some(1), None) },
        Case { class: Some(Class::AllocatorBroken), known: Some("allocator-broken"), evidence: "RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at \"c10/cuda/CUDACachingAllocator.cpp\":487, please report a bug to PyTorch. (exit 1)", ..case("expandable segments broken (quoted, pytorch#188008)", quoted(ALLOCATOR_BROKEN), Some(1), None) },
        Case { class: Some(Class::DeviceSideAssert), known: Some("device-side-assert"), evidence: "device-side assert triggered", ..case("device-side assert (quoted, seed 004)", quoted(ASSERT), Some(1), None) },
        Case { class: Some(Class::Timeout), stop: Some(Stop::Timeout { limit_s: 20.0 }), evidence: "ran past its time limit (20 s): ended with SIGTERM to its process group, then SIGKILL", ..case("timeout", vec![], None, Some(9)) },
        Case { status: Status::Stopped, class: Some(Class::Interrupted), stop: Some(Stop::Interrupted("stopped by Ctrl-C".into())), evidence: "stopped by Ctrl-C", ..case("Ctrl-C", vec![], None, Some(15)) },
        Case { class: Some(Class::OutOfMemory), known: Some("memory-exceeds-free"), stop: Some(Stop::Hang { grace_s: 300.0 }), evidence: "(then no output for 300 s: the job hung, ended with SIGTERM to all its processes)", ..case("a rank's OOM, then a hang (its words)", quoted(OOM), Some(1), None) },
        Case { status: Status::Pruned, stop: Some(Stop::Pruned("below the median".into())), evidence: "below the median", ..case("pruned", vec![], None, Some(15)) },
        // Done before the stop took effect: it finished.
        Case { status: Status::Finished, stop: Some(Stop::Timeout { limit_s: 1.0 }), evidence: "exited 0", ..case("finished as it was stopped", vec![], Some(0), None) },
        // A NaN, then a crash with no known message: the NaN says why.
        Case { class: Some(Class::NonFiniteLoss), known: Some("non-finite-loss"), non_finite: Some("val_loss NaN at step 2"), evidence: "then ended (exit 1)", ..case("NaN then a crash", vec!["boom".into()], Some(1), None) },
    ]
}

#[test]
fn each_ending_is_said_in_its_class() {
    for c in table() {
        let v = judge(&End {
            code: c.code,
            signal: c.signal,
            stop: c.stop.as_ref(),
            tail: &c.tail,
            non_finite: c.non_finite,
            reports: 1,
            oom_killed: None,
        });
        assert_eq!(
            (v.status, v.class, v.known),
            (c.status, c.class, c.known),
            "{}: {v:?}",
            c.name
        );
        assert!(
            v.evidence.contains(c.evidence),
            "{}: {:?} lacks {:?}",
            c.name,
            v.evidence,
            c.evidence
        );
        assert!(v.evidence.chars().count() <= EVIDENCE_CHARS);
        if let Some(a) = &v.advice {
            assert!(
                !a.contains("--sync-errors") && !a.contains("micro-batch"),
                "{}: advice names train's flags: {a}",
                c.name
            );
        }
        assert_eq!(v.advice.is_some(), v.known.is_some(), "{}", c.name);
    }
}

#[test]
fn advice_for_a_program_names_variables_or_code() {
    let v = judge(&End {
        code: Some(1),
        signal: None,
        stop: None,
        tail: &quoted(OOM_FRAGMENTED),
        non_finite: None,
        reports: 0,
        oom_killed: None,
    });
    assert!(v
        .advice
        .unwrap()
        .contains("PYTORCH_ALLOC_CONF=expandable_segments:True"));
    let v = judge(&End {
        code: Some(1),
        signal: None,
        stop: None,
        tail: &recorded("cpu-label"),
        non_finite: None,
        reports: 0,
        oom_killed: None,
    });
    assert!(v.advice.unwrap().contains("num_classes"));
}

#[test]
fn a_broken_allocator_is_told_to_restart_not_to_shrink() {
    let v = judge(&End {
        code: Some(1),
        signal: None,
        stop: None,
        tail: &quoted(ALLOCATOR_BROKEN),
        non_finite: None,
        reports: 3,
        oom_killed: None,
    });
    assert_eq!(v.class, Some(Class::AllocatorBroken), "{v:?}");
    let advice = v.advice.unwrap();
    assert!(
        advice.starts_with("restart your script in a new process")
            && advice.contains("a smaller batch will not help"),
        "{advice}"
    );
    assert!(advice.contains("PYTORCH_ALLOC_CONF=expandable_segments:False"));
}

#[test]
fn a_sigkill_while_its_cgroup_counted_an_oom_kill_is_an_out_of_memory() {
    let killed = |oom_killed| {
        judge(&End {
            code: None,
            signal: Some(libc::SIGKILL),
            stop: None,
            tail: &[],
            non_finite: None,
            reports: 2,
            oom_killed,
        })
    };
    let plain = killed(None);
    assert_eq!(plain.class, Some(Class::Killed), "{plain:?}");
    let oom = killed(Some(
        "/sys/fs/cgroup/memory/x/memory.oom_control: oom_kill 0 -> 1",
    ));
    assert_eq!(oom.class, Some(Class::OutOfMemory), "{oom:?}");
    assert!(
        oom.evidence.contains("kernel's OOM killer") && oom.evidence.contains("oom_kill 0 -> 1"),
        "{oom:?}"
    );
    assert!(oom.advice.is_some(), "{oom:?}");
}

/// The same out-of-memory, from a plain script and from Hugging Face's
/// Trainer (its traceback goes through transformers/trainer.py): one run's
/// advice names the batch and the model, never a sweep's --parallel, and
/// the Trainer's in its own flags.
#[test]
fn the_advice_fits_one_run_and_the_framework() {
    let judge_tail = |tail: &[String]| {
        judge(&End {
            code: Some(1),
            signal: None,
            stop: None,
            tail,
            non_finite: None,
            reports: 1,
            oom_killed: None,
        })
        .advice
        .unwrap()
    };
    let plain = judge_tail(&recorded("cpu-oom"));
    assert!(
        plain.contains("a smaller model") && !plain.contains("--parallel"),
        "{plain}"
    );
    let mut hf = vec![
        "{'loss': 2.3026, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.5}".to_string(),
        "Traceback (most recent call last):".into(),
        "  File \"/venv/lib/python3.12/site-packages/transformers/trainer.py\", line 2325, in train".into(),
    ];
    hf.extend(recorded("cpu-oom"));
    let words = judge_tail(&hf);
    assert!(
        words.contains("--per_device_train_batch_size") && !words.contains("--parallel"),
        "{words}"
    );
}

/// The fix's halving rule compares the request of each out-of-memory: read
/// from the whole line, where the evidence may be cut.
#[test]
fn an_out_of_memory_keeps_its_figures() {
    let judged = |tail: &[String]| {
        judge(&End {
            code: Some(1),
            signal: None,
            stop: None,
            tail,
            non_finite: None,
            reports: 0,
            oom_killed: None,
        })
    };
    let cpu = judged(&recorded("cpu-oom")).oom.unwrap();
    assert_eq!(cpu.tried_mib, Some(1577058304.0 / 1048576.0));
    let long = format!(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which 2.06 MiB is free. {}Including non-PyTorch memory, this process has 78.50 GiB memory in use. Of the allocated memory 77.85 GiB is allocated by PyTorch, and 10.96 MiB is reserved by PyTorch but unallocated.",
        "Process 2702 has 1.00 GiB memory in use. ".repeat(12)
    );
    let v = judged(&[long]);
    assert!(v.evidence.len() <= EVIDENCE_CHARS && !v.evidence.contains("is allocated by PyTorch"));
    let gpu = v.oom.unwrap();
    assert_eq!(gpu.tried_mib, Some(64.0));
    assert!((gpu.allocated_mib.unwrap() - 77.85 * 1024.0).abs() < 0.01);
    let other = judged(&["ValueError: shape mismatch".to_string()]);
    assert_eq!(other.oom, None);
}

#[test]
fn the_rank_that_said_the_failure_leads_though_the_launcher_saw_another_end_first() {
    // As a loaded machine ran it: rank 1 ran out of memory, rank 0's
    // all-reduce broke and it exited first, and the launcher ended rank 1
    // while it was still tearing down.
    let tail: Vec<String> = "[rank 0] {\"epoch\": 1, \"loss\": 2.43}
[rank 1] [rank1]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 134217728 bytes. Error code 12 (Cannot allocate memory)
[rank 0] [rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:29091
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Failures:
[1]:
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 4108)
-----------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4107)
====================================================="
        .lines()
        .map(String::from)
        .collect();
    let v = judge(&End {
        code: Some(1),
        signal: None,
        stop: None,
        tail: &tail,
        non_finite: None,
        reports: 1,
        oom_killed: None,
    });
    assert_eq!(v.class, Some(Class::OutOfMemory), "{v:?}");
    assert!(
        v.evidence
            .starts_with("rank 1: RuntimeError: [enforce fail")
            && v.evidence.ends_with(
                "; rank 0 failed after it (exit 1: the launcher's first observed failure)"
            ),
        "{}",
        v.evidence
    );
}
