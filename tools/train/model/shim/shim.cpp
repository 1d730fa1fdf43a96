// What tch does not expose, as a small C ABI: the CUDA caching allocator's
// statistics (allocated / reserved, current and peak, retries, OOMs), emptying
// its cache, resetting peaks, and autocast with a chosen dtype (tch's
// autocast takes none). Built by tools/train/model/build.rs against the headers
// of the libtorch train-model links. TG_WITH_CUDA is defined only when the CUDA
// headers were found; without it every CUDA call answers "not available".

#include <ATen/autocast_mode.h>
#include <c10/core/ScalarType.h>
#include <cstdint>
#include <cstring>
#include <exception>

#ifdef TG_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace {
void put(char* buf, size_t len, const char* msg) {
  if (buf && len) {
    std::strncpy(buf, msg, len - 1);
    buf[len - 1] = '\0';
  }
}
}  // namespace

extern "C" {

// 1 when this shim was built with the CUDA allocator, else 0.
int tg_has_cuda_allocator() {
#ifdef TG_WITH_CUDA
  return 1;
#else
  return 0;
#endif
}

// out[0..6]: allocated current, allocated peak, reserved current, reserved
// peak (bytes), alloc retries, OOMs. Returns 0, -1 when not available, -2 on
// error (message in err).
int tg_cuda_memory_stats(int device, int64_t* out, char* err, size_t errlen) {
#ifdef TG_WITH_CUDA
  try {
    if (c10::cuda::device_count() <= device) {
      put(err, errlen, "no such CUDA device");
      return -1;
    }
    auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = s.allocated_bytes[agg].current;
    out[1] = s.allocated_bytes[agg].peak;
    out[2] = s.reserved_bytes[agg].current;
    out[3] = s.reserved_bytes[agg].peak;
    out[4] = s.num_alloc_retries;
    out[5] = s.num_ooms;
    return 0;
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return -2;
  } catch (...) {
    // Nothing may unwind through extern "C".
    put(err, errlen, "an exception that is not a std::exception");
    return -2;
  }
#else
  (void)device;
  (void)out;
  put(err, errlen, "train was built without the CUDA allocator headers");
  return -1;
#endif
}

int tg_cuda_reset_peak(int device, char* err, size_t errlen) {
#ifdef TG_WITH_CUDA
  try {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
    return 0;
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return -2;
  } catch (...) {
    // Nothing may unwind through extern "C".
    put(err, errlen, "an exception that is not a std::exception");
    return -2;
  }
#else
  (void)device;
  put(err, errlen, "train was built without the CUDA allocator headers");
  return -1;
#endif
}

int tg_cuda_empty_cache(char* err, size_t errlen) {
#ifdef TG_WITH_CUDA
  try {
    c10::cuda::CUDACachingAllocator::emptyCache();
    return 0;
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return -2;
  } catch (...) {
    // Nothing may unwind through extern "C".
    put(err, errlen, "an exception that is not a std::exception");
    return -2;
  }
#else
  put(err, errlen, "train was built without the CUDA allocator headers");
  return -1;
#endif
}

// Turns autocast on (dtype 0: float16, 1: bfloat16) or off for the CPU
// (device 0) or CUDA (device 1). Turning it off clears the cast cache.
int tg_autocast(int device, int enabled, int dtype, char* err, size_t errlen) {
  try {
    const auto dev = device == 1 ? at::kCUDA : at::kCPU;
    if (enabled) {
      at::autocast::set_autocast_dtype(dev, dtype == 1 ? at::kBFloat16 : at::kHalf);
      at::autocast::increment_nesting();
      at::autocast::set_autocast_enabled(dev, true);
    } else {
      at::autocast::set_autocast_enabled(dev, false);
      if (at::autocast::decrement_nesting() == 0) {
        at::autocast::clear_cache();
      }
    }
    return 0;
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return -2;
  } catch (...) {
    // Nothing may unwind through extern "C".
    put(err, errlen, "an exception that is not a std::exception");
    return -2;
  }
}

}  // extern "C"
