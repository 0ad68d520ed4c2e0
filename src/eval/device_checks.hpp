// Device-side helpers of the evaluator and of verify_hgemm: content checksums and guard bands.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpu/cuda.hpp"

namespace kforge {

// An order-sensitive 64-bit checksum of `bytes` (a multiple of 2) of device memory.
uint64_t device_checksum(const void* p, size_t bytes, cudaStream_t s);
// How many of `bytes` bytes differ from `pattern`.
uint64_t count_bytes_not(const void* p, size_t bytes, unsigned char pattern, cudaStream_t s);

// Device memory with a 64 KiB guard band of a known byte on each side of the usable region:
// arm() fills everything with the pattern, damaged() counts guard bytes written since.
class Guarded {
 public:
  static constexpr unsigned char kGuardByte = 0xA5;
  static constexpr size_t kGuardBytes = 64 * 1024;
  Guarded(size_t bytes, const char* what) : bytes_(bytes), buf_(bytes + 2 * kGuardBytes, what) {}
  void arm(cudaStream_t s) const { KF_CUDA(cudaMemsetAsync(buf_.get(), kGuardByte, buf_.bytes(), s)); }
  void* ptr() const { return buf_.as<char>() + kGuardBytes; }
  template <class T> T* as() const { return static_cast<T*>(ptr()); }
  size_t bytes() const { return bytes_; }
  uint64_t damaged(cudaStream_t s) const {
    return count_bytes_not(buf_.get(), kGuardBytes, kGuardByte, s) +
           count_bytes_not(buf_.as<char>() + kGuardBytes + bytes_, kGuardBytes, kGuardByte, s);
  }

 private:
  size_t bytes_;
  DeviceBuffer buf_;
};

// One checksum over two operands (A and B of a GEMM): changes when either changes.
inline uint64_t inputs_checksum(const Guarded& a, const Guarded& b, cudaStream_t s) {
  return device_checksum(a.ptr(), a.bytes(), s) * 31 + device_checksum(b.ptr(), b.bytes(), s);
}

}  // namespace kforge
