//! Where train meets libtorch, CUDA and libc: the C++ shim's allocator and
//! autocast, the CUDA driver's device list, libtorch's panics as errors,
//! tensors as bytes, and glibc malloc's thresholds for libtorch's heap.
//! Without libtorch only the CUDA driver's device list.

pub(crate) mod cuda_driver;
#[cfg(feature = "libtorch")]
pub(crate) mod malloc;
#[cfg(feature = "libtorch")]
pub(crate) mod panics;
#[cfg(feature = "libtorch")]
pub(crate) mod shim;
#[cfg(feature = "libtorch")]
pub(crate) mod tensor_bytes;
