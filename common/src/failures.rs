//! Known failures of PyTorch training runs, recognised from the text libtorch
//! (or PyTorch) reports. One table: train classifies its own errors with it,
//! and a sweep groups failed trials by its classes (seed 004's analysis).
//! Each entry's needles are strings libtorch really emits: they were read
//! from the shipped libraries (`strings libc10_cuda.so`, `libtorch_cuda.so`),
//! from torch/_inductor/cudagraph_utils.py, and from the CUDA runtime's error
//! strings.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    OutOfMemory,
    CudaGraphPointer,
    DeviceSideAssert,
    CudaError,
    NonFiniteLoss,
    Other,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::OutOfMemory => "out-of-memory",
            Class::CudaGraphPointer => "cuda-graph-pointer",
            Class::DeviceSideAssert => "device-side-assert",
            Class::CudaError => "cuda-error",
            Class::NonFiniteLoss => "non-finite-loss",
            Class::Other => "other",
        }
    }

    /// Failures a different config can avoid (the fallback chain's cue):
    /// memory, CUDA graphs, and a loss that keeps diverging.
    pub fn config_caused(self) -> bool {
        matches!(
            self,
            Class::OutOfMemory | Class::CudaGraphPointer | Class::NonFiniteLoss
        )
    }
}

pub struct Known {
    pub id: &'static str,
    pub class: Class,
    /// Any of these in the message (case-sensitive, as libtorch writes them).
    pub needles: &'static [&'static str],
}

/// In priority order: the first entry with a matching needle wins (a
/// device-side assert message also contains "CUDA error: ").
pub const KNOWN: &[Known] = &[
    Known {
        id: "cuda-out-of-memory",
        class: Class::OutOfMemory,
        needles: &[
            "CUDA out of memory. Tried to allocate",
            "CUDA error: out of memory",
            "CUBLAS_STATUS_ALLOC_FAILED",
            "HIP out of memory. Tried to allocate",
        ],
    },
    Known {
        id: "cuda-graph-pointer-changed",
        class: Class::CudaGraphPointer,
        needles: &[
            "static input data pointer changed",
            "cudagraph managed tensor data pointer changed",
            "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run",
        ],
    },
    Known {
        id: "device-side-assert",
        class: Class::DeviceSideAssert,
        needles: &["device-side assert triggered"],
    },
    Known {
        id: "cuda-error",
        class: Class::CudaError,
        needles: &[
            "CUDA error: ",
            "cuDNN error: ",
            "CUDNN_STATUS_",
            "CUBLAS_STATUS_",
        ],
    },
    Known {
        id: "non-finite-loss",
        class: Class::NonFiniteLoss,
        needles: &[
            "non-finite loss",
            "loss is nan",
            "loss is inf",
            "loss is -inf",
        ],
    },
];

/// The class of an error message.
pub fn classify(message: &str) -> Class {
    KNOWN
        .iter()
        .find(|k| k.needles.iter().any(|n| message.contains(n)))
        .map_or(Class::Other, |k| k.class)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real messages: the first is a PyTorch 2.x OOM as printed in a user's
    // log; its parts are in libc10_cuda.so ("CUDA out of memory. Tried to
    // allocate ", " is reserved by PyTorch but unallocated.").
    const OOM: &str = "CUDA out of memory. Tried to allocate 320.00 MiB. GPU 0 has a total capacity of 31.37 GiB of which 80.69 MiB is free. Including non-PyTorch memory, this process has 31.28 GiB memory in use. Of the allocated memory 30.76 GiB is allocated by PyTorch, and 33.46 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
    // Seed 001, from torch/_inductor/cudagraph_utils.py.
    const GRAPH: &str = "RuntimeError: static input data pointer changed.\ninput name: primals_1. data pointer changed from 12919305216 to 12919242752.";
    // Seed 004; "device-side assert triggered" is cudaErrorAssert's string.
    const ASSERT: &str = "torch.AcceleratorError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.";

    #[test]
    fn real_messages_are_classified() {
        assert_eq!(classify(OOM), Class::OutOfMemory);
        assert_eq!(
            classify("RuntimeError: CUDA error: out of memory"),
            Class::OutOfMemory
        );
        assert_eq!(classify(GRAPH), Class::CudaGraphPointer);
        assert_eq!(
            classify("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. "),
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
            classify("shape '[2, 3]' is invalid for input of size 5"),
            Class::Other
        );
    }

    #[test]
    fn config_caused_failures_are_the_fallback_cues() {
        assert!(Class::OutOfMemory.config_caused());
        assert!(Class::CudaGraphPointer.config_caused());
        assert!(!Class::DeviceSideAssert.config_caused());
        assert!(!Class::Other.config_caused());
    }
}
