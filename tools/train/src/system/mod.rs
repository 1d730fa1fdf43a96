//! Where train meets libtorch and CUDA: the C++ shim's allocator and
//! autocast, the CUDA driver's device list, libtorch's panics as errors, and
//! tensors as bytes.

pub mod cuda_driver;
pub mod panics;
pub mod shim;
pub mod tensor_bytes;
