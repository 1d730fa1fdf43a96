//! Known failures of PyTorch training runs, recognised from the text libtorch,
//! PyTorch or the host prints. One table: train classifies its own errors
//! with it (summary.yaml's error_class), a sweep groups failed trials by its
//! classes, and `cfgcheck --explain` turns a pasted log into the cause and
//! the fix. Each needle is a string really emitted: read from the shipped
//! libraries (`strings libc10_cuda.so`, `libtorch_cuda.so`, `libtorch_cpu.so`,
//! `libcudnn.so.9`), from torch/_inductor/cudagraph_utils.py, from the CUDA
//! runtime's error strings, or from the seeds' own logs. An entry that a
//! cfgcheck rule would have caught beforehand has that rule's id.

use aho_corasick::AhoCorasick;
use common::wire::failure::{Class, OomFigures};
use common::wire::hazard::HazardId;
use std::sync::OnceLock;

pub struct Known {
    /// The id; where a cfgcheck rule would have caught it, the rule's id.
    pub id: &'static str,
    pub class: Class,
    /// Any of these in a line (case-sensitive, as they are printed).
    pub needles: &'static [&'static str],
    pub title: &'static str,
    /// The root cause, in two or three sentences (from the seeds).
    pub cause: &'static str,
    pub fix: &'static str,
    /// The same for the user's own script (`train run`, program sweeps):
    /// an environment variable or a code change, never train's flags. For
    /// one run: a sweep adds `sweep_fix`.
    pub program_fix: &'static str,
    /// What a program sweep adds to `program_fix` (fewer trials at once),
    /// empty where that does not help.
    pub sweep_fix: &'static str,
    /// `program_fix` in Hugging Face Trainer's words (its flags,
    /// `num_labels`), for a Trainer's log; None: `program_fix` fits.
    pub hf_fix: Option<&'static str>,
    /// The cfgcheck rule that catches it before the run, if any.
    pub rule: Option<HazardId>,
}

const OOM_NEEDLES: &[&str] = &[
    "CUDA out of memory. Tried to allocate",
    "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "HIP out of memory. Tried to allocate",
];

/// In priority order: the first entry with a matching needle classifies a
/// message (a device-side assert message also contains "CUDA error: ").
pub const KNOWN: &[Known] = &[
    // First: the failed mapping behind it is often an out-of-memory line
    // printed just before, and the log's class is the broken allocator.
    Known {
        id: "allocator-broken",
        class: Class::AllocatorBroken,
        // TORCH_INTERNAL_ASSERT's text around the check in the expandable
        // segment's map (pytorch#188008 on 2.14.0: `!handles_.at(i)
        // INTERNAL ASSERT FAILED at "c10/cuda/CUDACachingAllocator.cpp":487`;
        // pytorch#166234 on 2.9.0, line 430): the check names the slot's
        // handle, which only expandable segments have.
        needles: &["!handles_.at(i) INTERNAL ASSERT FAILED"],
        title: "the CUDA caching allocator is broken for the rest of this process (expandable segments)",
        cause: "With expandable_segments:True, mapping more GPU memory into a segment failed part-way (out of memory at the cuMemSetAccess step), leaving slots marked in use but unmapped. The next allocation into that range trips `!handles_.at(i) INTERNAL ASSERT FAILED at \"c10/cuda/CUDACachingAllocator.cpp\"`, and from then on every allocation in the process fails the same assert, whatever its size, until the process restarts (pytorch#188008, torch 2.14; the same assert on 2.9.0 in pytorch#166234).",
        fix: "restart the run in a new process: train --resume DIR continues from the last epoch, and a smaller batch_size will not help. If it comes back, turn expandable segments off for the run: environment: {PYTORCH_ALLOC_CONF: \"expandable_segments:False\"}",
        program_fix: "restart your script in a new process, from its last checkpoint if it saves them: a smaller batch will not help (a program sweep runs the trial again by itself). If it comes back, run without expandable segments: PYTORCH_ALLOC_CONF=expandable_segments:False before the command",
        sweep_fix: "",
        hf_fix: None,
        rule: None,
    },
    Known {
        id: HazardId::MemoryExceedsFree.as_str(),
        class: Class::OutOfMemory,
        needles: OOM_NEEDLES,
        title: "CUDA out of memory: the step needs more than the GPU has free",
        cause: "The model, its optimizer state and one step's activations do not fit in the GPU's free memory: the batch, the image size, the frames or the model are too large for this card, or another process holds part of it. The allocation that failed is named in the message.",
        fix: "a smaller batch_size (cfgcheck --fit computes it), gradient_checkpointing: true, mixed_precision: bf16, or the 32/64/128 model (memory_optimized: true); train splits the batch into micro-batches by itself",
        program_fix: "a smaller batch size in your config or script, gradient checkpointing (torch.utils.checkpoint), bf16 autocast, or a smaller model",
        sweep_fix: "or fewer trials at once on the GPU (--parallel)",
        hf_fix: Some("a smaller --per_device_train_batch_size with a larger --gradient_accumulation_steps (the same effective batch), --gradient_checkpointing, --bf16, or a smaller model; `train run --auto-fix` tries these in turn"),
        rule: Some(HazardId::MemoryExceedsFree),
    },
    // Chosen by `explain` from an out-of-memory message's figures, not by a
    // needle of its own.
    Known {
        id: HazardId::AllocatorFragmentation.as_str(),
        class: Class::OutOfMemory,
        needles: &[],
        title: "CUDA out of memory from fragmentation: memory reserved but unallocated",
        cause: "PyTorch's caching allocator held enough free memory for the allocation, but in pieces: \"reserved by PyTorch but unallocated\" is at least what was asked for. Over many epochs, parallel trials or a sweep, fragmentation grows until a small allocation fails, in a sweep often hundreds of trials in.",
        fix: "PYTORCH_ALLOC_CONF=expandable_segments:True (PYTORCH_CUDA_ALLOC_CONF before PyTorch 2.9); fewer parallel trials; train sets it by default",
        program_fix: "PYTORCH_ALLOC_CONF=expandable_segments:True (PYTORCH_CUDA_ALLOC_CONF before torch 2.9; train run and program sweeps set it unless you did)",
        sweep_fix: "or fewer trials at once (--parallel)",
        hf_fix: None,
        rule: Some(HazardId::AllocatorFragmentation),
    },
    Known {
        id: "host-out-of-memory",
        class: Class::OutOfMemory,
        // libc10.so's CPU allocator.
        // Python's own, for memory a script allocates outside torch.
        needles: &["DefaultCPUAllocator: can't allocate memory", "MemoryError"],
        title: "out of host memory: libtorch's CPU allocator refused",
        cause: "A tensor in host memory could not be allocated, for one of two causes: the host's memory was used up (a batch too large for a run on the CPU, a whole dataset materialised at once, other processes holding the memory), or the process reached a limit it ran under while the host still had memory free (`ulimit -v`, a cgroup's memory.max, a container's memory limit, a job scheduler's). Unlike the kernel's out-of-memory killer (signal 9), libtorch reports it as an error the program can recover from.",
        fix: "a smaller batch_size, or a max_train_examples cap; train splits the batch into micro-batches by itself",
        program_fix: "a smaller batch size or a smaller model, a dataset loaded lazily rather than whole, or fewer DataLoader workers",
        sweep_fix: "or fewer trials at once (--parallel)",
        hf_fix: Some("a smaller --per_device_train_batch_size with a larger --gradient_accumulation_steps (the same effective batch), a smaller model, a dataset loaded lazily (the datasets library's streaming=True) rather than whole, or fewer --dataloader_num_workers"),
        rule: None,
    },
    Known {
        id: HazardId::CudaGraphsCheckpointing.as_str(),
        class: Class::CudaGraphPointer,
        needles: &[
            "static input data pointer changed",
            "cudagraph managed tensor data pointer changed",
            "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run",
            // The other face of the same clash (pytorch#154306, open in
            // 2.11): torch/_inductor/cudagraph_trees.py's invariant check
            // prints "... deallocate during graph  recording that did not
            // occur during replay" with two spaces where its source breaks
            // the string; the two halves, each single-spaced, match either
            // spacing.
            "graph recording observed an input tensor deallocate during graph",
            "recording that did not occur during replay",
        ],
        title: "CUDA graph replay found a tensor at a new address",
        cause: "torch.compile's \"reduce-overhead\" and \"max-autotune\" modes record CUDA graphs, which replay kernels on the exact memory addresses recorded in epoch 1. Gradient checkpointing recomputes activations during backward and they land at different addresses, so the replay in epoch 2 stops rather than compute on stale memory.",
        fix: "torch_compile_mode: default (keeps most of the speed-up), or torch_compile: false",
        program_fix: "torch.compile(mode=\"default\") instead of \"reduce-overhead\", or torch.compiler.cudagraph_mark_step_begin() before each step, or no gradient checkpointing under CUDA graphs",
        sweep_fix: "",
        hf_fix: None,
        rule: Some(HazardId::CudaGraphsCheckpointing),
    },
    Known {
        id: "label-out-of-range",
        class: Class::LabelOutOfRange,
        // torch's nll_loss on the CPU (aten/src/ATen/native/LossNLL.cpp),
        // as examples/own_script/main.py's `fault: label` prints it.
        needles: &["IndexError: Target "],
        title: "a class label outside the model's classes",
        cause: "A target reached cross-entropy that is not in [0, num_classes): labels counted from 1, a class the head does not have, or -1 for \"unlabelled\". On the CPU torch says so (IndexError: Target N is out of bounds); on a GPU the same label is a device-side assert whose traceback points elsewhere.",
        fix: "check the labels (verify-fixes' data check, or train check-data), or raise num_classes",
        program_fix: "check the labels: every target in [0, num_classes) (e.g. assert y.min() >= 0 and y.max() < num_classes), or raise the model's number of classes",
        sweep_fix: "",
        hf_fix: Some("check the labels: every label in [0, num_labels), the model's config.num_labels (from_pretrained(..., num_labels=N)), and -100 only where a label is to be ignored; or raise num_labels"),
        rule: None,
    },
    Known {
        id: "device-side-assert",
        class: Class::DeviceSideAssert,
        needles: &["device-side assert triggered"],
        title: "a CUDA kernel's assertion failed (device-side assert)",
        cause: "Most often a label outside [0, num_labels) reached cross-entropy, or an index went out of range. CUDA errors are asynchronous: they surface at a later synchronising call (such as model.cpu() or .item()), so the traceback points at the wrong line, and the CUDA context is unusable afterwards.",
        fix: "check the labels (verify-fixes' data check, or train's pre-training pass); rerun with CUDA_LAUNCH_BLOCKING=1 (train --sync-errors) to see the failing line",
        program_fix: "CUDA_LAUNCH_BLOCKING=1 to name the failing kernel (a program sweep reruns the trial once with it); check that every label is in [0, num_classes)",
        sweep_fix: "",
        hf_fix: Some("CUDA_LAUNCH_BLOCKING=1 to name the failing kernel (a program sweep reruns the trial once with it); check that every label is in [0, num_labels), the model's config.num_labels"),
        rule: None,
    },
    Known {
        id: "cudnn-error",
        class: Class::CudaError,
        needles: &["cuDNN error: ", "CUDNN_STATUS_EXECUTION_FAILED", "CUDNN_STATUS_INTERNAL_ERROR", "CUDNN_STATUS_NOT_SUPPORTED"],
        title: "a cuDNN call failed",
        cause: "cuDNN refused or failed a convolution: often memory pressure in disguise (no room for its workspace), sometimes an input layout or size it does not support, or a cuDNN that does not match the libtorch build.",
        fix: "free memory as for an out-of-memory error (smaller batch, checkpointing); check that `train info` reports the cuDNN torch was built with",
        program_fix: "free GPU memory (a smaller batch), and check torch.backends.cudnn.version() against the one torch was built with",
        sweep_fix: "",
        hf_fix: None,
        rule: None,
    },
    Known {
        id: "killed",
        class: Class::Killed,
        needles: &["Signal 9 (SIGKILL)", "exit code -9", "Exit code -9", "exitcode  : -9", "Killed"],
        title: "the process was killed by the host (signal 9)",
        cause: "The host ran out of RAM and its out-of-memory killer ended the process, with no Python traceback: a whole dataset loaded into memory, or DataLoader worker processes each holding copies, on a small host such as Colab's 12.7 GB.",
        fix: "num_workers: 0 and a max_train_examples cap; train --resume continues from the last epoch",
        program_fix: "load less into host memory (a lazy dataset, DataLoader num_workers=0, a smaller batch or model); `dmesg | grep -i oom` confirms the OOM killer",
        sweep_fix: "or fewer trials at once (--parallel)",
        hf_fix: None,
        rule: Some(HazardId::WorkersSmallHost),
    },
    Known {
        id: "non-finite-loss",
        class: Class::NonFiniteLoss,
        needles: &["non-finite loss", "loss is nan", "loss is NaN", "loss is inf", "loss is -inf", "returned nan values in its"],
        title: "the loss became NaN or infinite",
        cause: "The optimisation diverged: a learning rate too high for the batch, fp16 overflow without a loss scaler, or NaN or inf already in the inputs or targets.",
        fix: "a lower learning_rate, grad_clip, bf16 instead of fp16, and a data check (verify-fixes) for NaN or inf",
        program_fix: "a lower learning rate, gradient clipping (torch.nn.utils.clip_grad_norm_), bf16 instead of fp16, and a check of the inputs for NaN (torch.isnan(x).any())",
        sweep_fix: "",
        hf_fix: None,
        rule: None,
    },
    Known {
        id: "aten-cuda-missing",
        class: Class::Other,
        needles: &["Cannot initialize CUDA without ATen_cuda library"],
        title: "libtorch's CUDA library is not loaded",
        cause: "The binary was linked with --as-needed, which drops libtorch_cuda because nothing refers to it by symbol, so libtorch runs CPU-only and fails at the first CUDA call.",
        fix: "link libtorch_cuda explicitly (-Wl,--no-as-needed -ltorch_cuda), as train's build.rs does for train-model; check with `ldd train-model | grep torch_cuda`",
        program_fix: "a torch build with CUDA (pip's CUDA wheels), and `python -c \"import torch; print(torch.cuda.is_available())\"`",
        sweep_fix: "",
        hf_fix: None,
        rule: None,
    },
    Known {
        id: "torch-version-mismatch",
        class: Class::Other,
        needles: &["this tch version expects PyTorch", "undefined symbol: _ZN"],
        title: "libtorch and the build do not match",
        cause: "The program was built against one libtorch and runs against another (or tch expects another PyTorch version): C++ symbols differ between releases, so loading fails or the build refuses.",
        fix: concat!("use torch==", common::torch_for_train!(), " for tch ", common::tch_version!(), " (just setup), and run with the same libraries the build used (train's rpath)"),
        program_fix: "matching versions of torch and the libraries built against it (torchvision, torchaudio, extensions): reinstall them together",
        sweep_fix: "",
        hf_fix: None,
        rule: None,
    },
    Known {
        id: "cuda-error",
        class: Class::CudaError,
        needles: &["CUDA error: ", "CUBLAS_STATUS_"],
        title: "a CUDA error",
        cause: "A CUDA call failed. CUDA errors are asynchronous and surface at a later synchronising call, so the traceback may point elsewhere; the context may be unusable afterwards.",
        fix: "rerun with CUDA_LAUNCH_BLOCKING=1 (train --sync-errors) to find the failing kernel",
        program_fix: "CUDA_LAUNCH_BLOCKING=1 to find the failing kernel (a program sweep reruns a device-side assert with it)",
        sweep_fix: "",
        hf_fix: None,
        rule: None,
    },
];

/// One automaton over every needle: a 50 MB log is scanned in one pass.
fn automaton() -> &'static (AhoCorasick, Vec<usize>) {
    static A: OnceLock<(AhoCorasick, Vec<usize>)> = OnceLock::new();
    A.get_or_init(|| {
        let mut owner = Vec::new();
        let mut needles = Vec::new();
        for (i, k) in KNOWN.iter().enumerate() {
            for n in k.needles {
                needles.push(*n);
                owner.push(i);
            }
        }
        (
            AhoCorasick::new(needles).expect("fixed needles build"),
            owner,
        )
    })
}

/// The first entry (in table order) that a text matches.
pub fn find(text: &str) -> Option<&'static Known> {
    rank(text).map(|i| &KNOWN[i])
}

/// The index in KNOWN of the first entry a text matches.
fn rank(text: &str) -> Option<usize> {
    let (ac, owner) = automaton();
    ac.find_overlapping_iter(text)
        .map(|m| owner[m.pattern().as_usize()])
        .min()
}

/// The entry a program's last output lines match, and the line that says
/// it: the first entry in table order that any line matches, at the last
/// line that matches it (the final error, after earlier warnings).
pub fn in_output(lines: &[&str]) -> Option<(&'static Known, usize)> {
    let mut best: Option<(usize, usize)> = None;
    for (i, line) in lines.iter().enumerate() {
        let Some(rank) = rank(line) else { continue };
        if best.is_none_or(|(r, _)| rank <= r) {
            best = Some((rank, i));
        }
    }
    best.map(|(rank, i)| (&KNOWN[rank], i))
}

/// The class of an error message.
pub fn classify(message: &str) -> Class {
    find(message).map_or(Class::Other, |k| k.class)
}

/// The figures of a PyTorch out-of-memory message, in MiB: reads "Tried to
/// allocate X. GPU 0 has a total capacity of Y of which Z is free. ... A is
/// allocated by PyTorch, and B is reserved by PyTorch but unallocated.",
/// and the CPU allocator's "you tried to allocate N bytes" (its request only).
pub fn oom_figures(line: &str) -> OomFigures {
    let after = |marker: &str| {
        line.find(marker)
            .and_then(|i| size_mib(&line[i + marker.len()..]))
    };
    let before = |marker: &str| {
        let end = line.find(marker)?;
        let head = line[..end].trim_end();
        // After the last character that is not part of "<number> <unit>"
        // (a multi-byte one too: its whole width, never a byte inside it).
        let start = head
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '.' || *c == ' '))
            .map_or(0, |(i, c)| i + c.len_utf8());
        // The last "<number> <unit>" before the marker.
        let words: Vec<&str> = head[start..].split_whitespace().collect();
        let n = words.len();
        (n >= 2)
            .then(|| size_mib(&format!("{} {}", words[n - 2], words[n - 1])))
            .flatten()
    };
    OomFigures {
        tried_mib: after("Tried to allocate ").or_else(|| after("you tried to allocate ")),
        total_mib: after("has a total capacity of "),
        free_mib: after(" of which ").or_else(|| before(" is free")),
        allocated_mib: before(" is allocated by PyTorch"),
        reserved_unallocated_mib: before(" is reserved by PyTorch but unallocated"),
    }
}

/// "1.41 GiB" -> 1443.84 (MiB).
fn size_mib(s: &str) -> Option<f64> {
    let mut it = s.split_whitespace();
    let v: f64 = it.next()?.trim_end_matches(['.', ',']).parse().ok()?;
    let unit = it.next()?.trim_end_matches(['.', ',', ')']);
    let scale = match unit {
        "bytes" | "B" => common::estimate::mib_f64(1),
        "KiB" => 1.0 / 1024.0,
        "MiB" => 1.0,
        "GiB" => 1024.0,
        "TiB" => 1024.0 * 1024.0,
        _ => return None,
    };
    Some(v * scale)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // Real messages: a PyTorch 2.x OOM as printed in a user's log (its parts
    // are in libc10_cuda.so: "CUDA out of memory. Tried to allocate ",
    // " is reserved by PyTorch but unallocated.").
    pub const OOM: &str = "CUDA out of memory. Tried to allocate 320.00 MiB. GPU 0 has a total capacity of 31.37 GiB of which 80.69 MiB is free. Including non-PyTorch memory, this process has 31.28 GiB memory in use. Of the allocated memory 30.76 GiB is allocated by PyTorch, and 33.46 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
    // Another real one, where the reserved-but-unallocated part is large.
    pub const OOM_FRAGMENTED: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 364.31 MiB is free. Process 175356 has 77.26 GiB memory in use. Of the allocated memory 72.12 GiB is allocated by PyTorch, and 3.78 GiB is reserved by PyTorch but unallocated.";
    // The GPU run's (H100, torch 2.11, a Trainer script beside another
    // process holding 73.61 GiB): bench/gpu/results/2026-11-26-H100.
    pub const OOM_SHARED: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 GiB of which 2.06 GiB is free. Process 2702 has 73.61 GiB memory in use. Including non-PyTorch memory, this process has 3.50 GiB memory in use. Of the allocated memory 2.85 GiB is allocated by PyTorch, and 50.96 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
    // Seed 001, from torch/_inductor/cudagraph_utils.py.
    const GRAPH: &str = "RuntimeError: static input data pointer changed.\ninput name: primals_1. data pointer changed from 12919305216 to 12919242752.";
    // Seed 004; "device-side assert triggered" is cudaErrorAssert's string.
    const ASSERT: &str = "torch.AcceleratorError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.";

    // pytorch#188008's text on torch 2.14.0 (the issue quotes the assert
    // up to its line number; TORCH_INTERNAL_ASSERT ends it as below), and
    // pytorch#166234's whole line on 2.9.0.
    pub const ALLOCATOR_BROKEN: &str = "RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at \"c10/cuda/CUDACachingAllocator.cpp\":487, please report a bug to PyTorch.";
    const ALLOCATOR_BROKEN_2_9: &str = "!handles_.at(i) INTERNAL ASSERT FAILED at \"/pytorch/c10/cuda/CUDACachingAllocator.cpp\":430, please report a bug to PyTorch.";

    #[test]
    fn a_broken_allocator_outranks_the_oom_that_broke_it() {
        assert_eq!(classify(ALLOCATOR_BROKEN), Class::AllocatorBroken);
        assert_eq!(classify(ALLOCATOR_BROKEN_2_9), Class::AllocatorBroken);
        let k = find(ALLOCATOR_BROKEN).unwrap();
        assert!(k
            .program_fix
            .starts_with("restart your script in a new process"));
        // The failed mapping's OOM, then the assert on every allocation:
        // the log's class is the broken allocator.
        let lines = [OOM, ALLOCATOR_BROKEN, "step 12", ALLOCATOR_BROKEN];
        let (k, i) = in_output(&lines).unwrap();
        assert_eq!((k.id, i), ("allocator-broken", 3));
        // Another internal assert of the same file is not this one.
        assert_eq!(
            classify("RuntimeError: !block->expandable_segment_ INTERNAL ASSERT FAILED at \"../c10/cuda/CUDACachingAllocator.cpp\":2814, please report a bug to PyTorch."),
            Class::Other
        );
    }

    #[test]
    fn real_messages_are_classified() {
        assert_eq!(classify(OOM), Class::OutOfMemory);
        assert_eq!(
            classify("RuntimeError: CUDA error: out of memory"),
            Class::OutOfMemory
        );
        // libc10.so's CPU allocator, as train's tests make libtorch raise it.
        assert_eq!(
            classify("DefaultCPUAllocator: can't allocate memory: you tried to allocate 140737488355328 bytes. Error code 12 (Cannot allocate memory)"),
            Class::OutOfMemory
        );
        assert_eq!(classify(GRAPH), Class::CudaGraphPointer);
        assert_eq!(
            classify("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. "),
            Class::CudaGraphPointer
        );
        // torch 2.11's cudagraph_trees.py, exactly as it prints (two spaces).
        assert_eq!(
            classify("RuntimeError: TODO: graph recording observed an input tensor deallocate during graph  recording that did not occur during replay. Please file an issue."),
            Class::CudaGraphPointer
        );
        assert_eq!(
            classify("graph recording observed an input tensor deallocate during graph recording that did not occur during replay"),
            Class::CudaGraphPointer
        );
        assert_eq!(classify(ASSERT), Class::DeviceSideAssert);
        assert_eq!(
            classify("CUDA error: an illegal memory access was encountered"),
            Class::CudaError
        );
        assert_eq!(
            classify("cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"),
            Class::CudaError
        );
        assert_eq!(
            classify("loss is nan at epoch 3 step 4"),
            Class::NonFiniteLoss
        );
        assert_eq!(
            classify("Training failed with Exit code -9 (SIGKILL)"),
            Class::Killed
        );
        assert_eq!(
            classify("shape '[2, 3]' is invalid for input of size 5"),
            Class::Other
        );
    }

    #[test]
    fn rule_ids_are_cfgchecks() {
        for k in KNOWN {
            if let Some(rule) = k.rule {
                assert!(
                    crate::rules::RULES.iter().any(|r| r.id == rule),
                    "{}: no rule {rule}",
                    k.id
                );
            }
        }
    }

    #[test]
    fn oom_figures_tell_fragmentation_from_size() {
        let f = oom_figures(OOM);
        assert_eq!(f.tried_mib, Some(320.0));
        assert!((f.total_mib.unwrap() - 31.37 * 1024.0).abs() < 0.01);
        assert!((f.free_mib.unwrap() - 80.69).abs() < 0.01);
        assert!((f.allocated_mib.unwrap() - 30.76 * 1024.0).abs() < 0.01);
        assert!((f.reserved_unallocated_mib.unwrap() - 33.46).abs() < 0.01);
        assert!(!f.fragmented());
        // Another process's memory is not this one's fragmentation.
        assert_eq!(classify(OOM_SHARED), Class::OutOfMemory);
        let h = oom_figures(OOM_SHARED);
        assert_eq!(h.tried_mib, Some(4096.0));
        assert!((h.free_mib.unwrap() - 2.06 * 1024.0).abs() < 0.01);
        assert!((h.allocated_mib.unwrap() - 2.85 * 1024.0).abs() < 0.01);
        assert!(!h.fragmented(), "{h:?}");
        let g = oom_figures(OOM_FRAGMENTED);
        assert_eq!(g.tried_mib, Some(2048.0));
        assert!(g.fragmented(), "{g:?}");
        // libc10's CPU allocator says the request alone, in bytes.
        let c = oom_figures("RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 67108864 bytes. Error code 12 (Cannot allocate memory)");
        assert_eq!(c.tried_mib, Some(64.0));
        assert_eq!((c.allocated_mib, c.free_mib), (None, None));
        assert!(!c.fragmented());
        // Seed 004's figure alone.
        let s = oom_figures(
            "Tried to allocate 20.00 MiB. 1.41 GiB is reserved by PyTorch but unallocated.",
        );
        assert!(s.fragmented());
    }
}
