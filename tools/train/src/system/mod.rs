//! Where train meets libtorch, CUDA and libc: the C++ shim's allocator and
//! autocast, the CUDA driver's device list, libtorch's panics as errors,
//! tensors as bytes, and glibc malloc's thresholds.

pub(crate) mod cuda_driver;
pub(crate) mod malloc;
pub(crate) mod panics;
pub(crate) mod shim;
pub(crate) mod tensor_bytes;
