//! Test hooks, documented in docs/TROUBLESHOOTING.md, "Injecting failures: TRAINGUARD_FAULT": `TRAINGUARD_FAULT` injects the failures
//! train must survive, at a given epoch and step, so CI can show on a CPU
//! what a GPU does to a run. Read once, when a run starts (after the
//! config's `environment` is applied), and handed to the loop. A comma-separated list of `KIND@EPOCH:STEP`:
//!
//! - `sigkill`: SIGKILL just before that step (a real `kill -9`);
//! - `oom`: that step's first attempt fails with libtorch's CUDA
//!   out-of-memory error (its real message format, as c10 prints it);
//! - `oom-always`: every attempt from that step on fails so, whatever the
//!   micro-batch (a config that cannot fit);
//! - `alloc`: that step's first attempt, after its first micro-batch's
//!   forward and backward (batch norm's statistics already updated), asks
//!   libtorch under its autocast for more memory than any allocator has:
//!   libtorch's own allocator error, raised by tch as a panic, as a real out-of-memory
//!   error in a layer's forward is;
//! - `cuda-graph`: that step fails with the "static input data pointer
//!   changed" error of seed 001;
//! - `nan`: that step's loss is NaN;
//! - `abort`: SIGABRT just before that step (a crash with no summary, as a
//!   C++ assertion or a segfault leaves);
//! - `hang`: that step never ends (a deadlocked collective, a stuck
//!   driver), for a sweep's `--trial-timeout`.
//!
//! `none` disables them (a fallback config can set it in its `environment`).

use tch::TchError;

pub const VAR: &str = "TRAINGUARD_FAULT";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sigkill,
    Oom,
    OomAlways,
    Alloc,
    CudaGraph,
    Nan,
    Abort,
    Hang,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: Kind,
    pub epoch: u32,
    pub step: u64,
}

/// libtorch's OOM message (c10/cuda/CUDACachingAllocator.cpp), with figures.
pub const OOM_MESSAGE: &str = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 14.74 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 13.68 GiB memory in use. Of the allocated memory 12.21 GiB is allocated by PyTorch, and 1.41 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf) (injected by TRAINGUARD_FAULT)";
/// Elements of an f32 tensor of 2^47 bytes: more than a 47-bit user address
/// space holds, so every allocator refuses it at once, whatever the host.
pub const IMPOSSIBLE_FLOATS: i64 = 1 << 45;
/// Seed 001's error, as torch/_inductor/cudagraph_utils.py words it.
pub const GRAPH_MESSAGE: &str = "static input data pointer changed.\ninput name: primals_1. data pointer changed from 12919305216 to 12919242752. (injected by TRAINGUARD_FAULT)";

pub struct Faults {
    list: Vec<Fault>,
    /// `oom` and `alloc` faults already fired once.
    fired: Vec<(Kind, u32, u64)>,
}

impl Faults {
    /// The faults `TRAINGUARD_FAULT` asks for (none when it is unset).
    pub(crate) fn from_env() -> anyhow::Result<Faults> {
        Self::parse(&std::env::var(VAR).unwrap_or_default())
    }

    /// No faults.
    pub fn none() -> Faults {
        Faults {
            list: Vec::new(),
            fired: Vec::new(),
        }
    }

    /// `KIND@EPOCH:STEP[,...]`, or empty or `none` for no faults.
    pub fn parse(v: &str) -> anyhow::Result<Faults> {
        let mut list = Vec::new();
        for spec in v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "none")
        {
            let parsed = spec.split_once('@').and_then(|(kind, at)| {
                let kind = match kind {
                    "sigkill" => Kind::Sigkill,
                    "oom" => Kind::Oom,
                    "oom-always" => Kind::OomAlways,
                    "alloc" => Kind::Alloc,
                    "cuda-graph" => Kind::CudaGraph,
                    "nan" => Kind::Nan,
                    "abort" => Kind::Abort,
                    "hang" => Kind::Hang,
                    _ => return None,
                };
                let (e, s) = at.split_once(':')?;
                Some(Fault {
                    kind,
                    epoch: e.parse().ok()?,
                    step: s.parse().ok()?,
                })
            });
            list.push(parsed.ok_or_else(|| {
                common::bad_input!("{VAR}={v}: expected KIND@EPOCH:STEP[,...] with KIND one of sigkill, oom, oom-always, alloc, cuda-graph, nan, abort, hang")
            })?);
        }
        Ok(Faults {
            list,
            fired: Vec::new(),
        })
    }

    fn at(&self, kind: Kind, epoch: u32, step: u64) -> bool {
        self.list
            .iter()
            .any(|f| f.kind == kind && (f.epoch, f.step) == (epoch, step))
    }

    /// Before a step: SIGKILL, SIGABRT or a hang when asked.
    pub(crate) fn before_step(&self, epoch: u32, step: u64) {
        if self.at(Kind::Abort, epoch, step) {
            common::say!("train: {VAR}: SIGABRT before epoch {epoch} step {step}");
            std::process::abort();
        }
        if self.at(Kind::Hang, epoch, step) {
            common::say!("train: {VAR}: hanging at epoch {epoch} step {step}");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        if self.at(Kind::Sigkill, epoch, step) {
            common::say!("train: {VAR}: SIGKILL before epoch {epoch} step {step}");
            // SAFETY: raise has no preconditions; SIGKILL ends the process.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
    }

    /// At an attempt of a step: the error it should fail with, if any.
    pub(crate) fn error(&mut self, epoch: u32, step: u64) -> Option<TchError> {
        let always = self
            .list
            .iter()
            .any(|f| f.kind == Kind::OomAlways && (epoch, step) >= (f.epoch, f.step));
        if always || self.once(Kind::Oom, epoch, step) {
            return Some(TchError::Torch(OOM_MESSAGE.to_string()));
        }
        if self.at(Kind::CudaGraph, epoch, step) {
            return Some(TchError::Torch(GRAPH_MESSAGE.to_string()));
        }
        None
    }

    /// At an attempt of a step: whether it should make libtorch fail an
    /// allocation (the first attempt only).
    pub(crate) fn alloc(&mut self, epoch: u32, step: u64) -> bool {
        self.once(Kind::Alloc, epoch, step)
    }

    /// A fault of `kind` at this step that has not fired yet; now it has.
    fn once(&mut self, kind: Kind, epoch: u32, step: u64) -> bool {
        let fire = self.at(kind, epoch, step) && !self.fired.contains(&(kind, epoch, step));
        if fire {
            self.fired.push((kind, epoch, step));
        }
        fire
    }

    pub(crate) fn nan_loss(&self, epoch: u32, step: u64) -> bool {
        self.at(Kind::Nan, epoch, step)
    }
}
