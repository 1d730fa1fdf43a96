//! Where train meets libtorch and CUDA: the C++ shim's allocator and
//! autocast, the CUDA driver's device list, libtorch's panics as errors, and
//! tensors as bytes.

pub(crate) mod cuda_driver;
pub(crate) mod panics;
pub(crate) mod shim;
pub(crate) mod tensor_bytes;
