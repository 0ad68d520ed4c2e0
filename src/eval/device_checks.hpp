// Device-side helpers of the evaluator: content checksums and guard-band checks.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace kforge {

// An order-sensitive 64-bit checksum of `bytes` (a multiple of 2) of device memory.
uint64_t device_checksum(const void* p, size_t bytes, cudaStream_t s);
// How many of `bytes` bytes differ from `pattern`.
uint64_t count_bytes_not(const void* p, size_t bytes, unsigned char pattern, cudaStream_t s);

}  // namespace kforge
