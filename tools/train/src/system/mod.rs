//! Where train meets libtorch and CUDA: the C++ shim's allocator and
//! autocast, the CUDA driver's device list, libtorch's panics as errors, and
//! tensors as bytes. Without libtorch only the CUDA driver's device list.

pub(crate) mod cuda_driver;
#[cfg(feature = "libtorch")]
pub(crate) mod panics;
#[cfg(feature = "libtorch")]
pub(crate) mod shim;
#[cfg(feature = "libtorch")]
pub(crate) mod tensor_bytes;
