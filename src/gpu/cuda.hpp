// CUDA error checks and RAII owners for device memory, streams, events and graphs.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "core/error.hpp"

namespace kforge {

[[noreturn]] void throw_cuda(cudaError_t e, const char* what, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* what, const char* file, int line);

}  // namespace kforge

#define KF_CUDA(call)                                                          \
  do {                                                                         \
    cudaError_t kf_e_ = (call);                                                \
    if (kf_e_ != cudaSuccess) ::kforge::throw_cuda(kf_e_, #call, __FILE__, __LINE__); \
  } while (0)
#define KF_CUBLAS(call)                                                        \
  do {                                                                         \
    cublasStatus_t kf_s_ = (call);                                             \
    if (kf_s_ != CUBLAS_STATUS_SUCCESS) ::kforge::throw_cublas(kf_s_, #call, __FILE__, __LINE__); \
  } while (0)
// After a kernel launch: the launch's own error (bad configuration) surfaces here.
#define KF_CUDA_LAUNCHED() KF_CUDA(cudaGetLastError())

namespace kforge {

// Device memory. Allocation failure is reported with the size asked for and the memory free.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes, const char* what = "buffer");
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  void reset();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const;

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) const;

 private:
  cudaEvent_t e_ = nullptr;
};

// Milliseconds between two recorded events (synchronises on `end`).
float elapsed_ms(const Event& start, const Event& end);

class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec();
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  // Captures what `enqueue` puts on `s` and instantiates it.
  template <class F> void capture(cudaStream_t s, F&& enqueue) {
    reset();
    KF_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(s, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    finish_capture(s);
  }
  void launch(cudaStream_t s) const;
  void reset();

 private:
  void finish_capture(cudaStream_t s);
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace kforge
