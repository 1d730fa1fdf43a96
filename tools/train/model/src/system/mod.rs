//! Where train-model meets libtorch, CUDA and libc: the C++ shim's allocator
//! and autocast, libtorch's panics as errors, tensors as bytes, and glibc
//! malloc's thresholds for libtorch's heap. (The CUDA driver's device list
//! needs no libtorch: it is train's, tools/train/src/cuda_driver.rs.)

pub(crate) mod malloc;
pub(crate) mod panics;
pub(crate) mod shim;
pub(crate) mod tensor_bytes;
