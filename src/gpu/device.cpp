#include "gpu/device.hpp"

#include "core/error.hpp"
#include "gpu/cuda.hpp"

namespace kforge {

[[noreturn]] void throw_cuda(cudaError_t e, const char* what, const char* file, int line) {
  ErrorKind kind = ErrorKind::kRuntime;
  std::string msg;
  if (e == cudaErrorMemoryAllocation)
    msg = strf("out of GPU memory in %s", what);
  else
    msg = strf("CUDA error %s (%s) in %s", cudaGetErrorName(e), cudaGetErrorString(e), what);
  throw Error(kind, msg, file, line);
}

[[noreturn]] void throw_cublas(cublasStatus_t s, const char* what, const char* file, int line) {
  throw Error(ErrorKind::kRuntime, strf("cuBLAS error %s (%s) in %s", cublasGetStatusName(s),
                                        cublasGetStatusString(s), what),
              file, line);
}

DeviceBuffer::DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
  if (bytes == 0) return;
  cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // allocation failure is not sticky; clear it
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    ptr_ = nullptr;
    bytes_ = 0;
    KF_RUNTIME_ERROR("out of GPU memory: %s needs %.2f GiB, %.2f GiB of %.2f GiB free", what,
                     bytes / 1073741824.0, free_b / 1073741824.0, total_b / 1073741824.0);
  }
}
DeviceBuffer::~DeviceBuffer() { reset(); }
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void DeviceBuffer::reset() {
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

Stream::Stream() { KF_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}
void Stream::sync() const { KF_CUDA(cudaStreamSynchronize(s_)); }

Event::Event() { KF_CUDA(cudaEventCreate(&e_)); }
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}
void Event::record(cudaStream_t s) const { KF_CUDA(cudaEventRecord(e_, s)); }

float elapsed_ms(const Event& start, const Event& end) {
  KF_CUDA(cudaEventSynchronize(end.get()));
  float ms = 0;
  KF_CUDA(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return ms;
}

GraphExec::~GraphExec() { reset(); }
void GraphExec::reset() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}
void GraphExec::finish_capture(cudaStream_t s) {
  KF_CUDA(cudaStreamEndCapture(s, &graph_));
  KF_CUDA(cudaGraphInstantiate(&exec_, graph_, 0));
}
void GraphExec::launch(cudaStream_t s) const { KF_CUDA(cudaGraphLaunch(exec_, s)); }

std::string DeviceInfo::arch() const { return strf("sm_%d%d", cc_major, cc_minor); }

std::string cuda_version_string(int v) { return strf("%d.%d", v / 1000, (v % 1000) / 10); }

std::optional<std::string> gpu_unavailable_reason() {
  int driver = 0;
  cudaError_t e = cudaDriverGetVersion(&driver);
  if (e != cudaSuccess || driver == 0) return std::string("no CUDA driver is installed on this machine (no GPU)");
  int count = 0;
  e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return strf("no usable CUDA device: %s", cudaGetErrorString(e));
  }
  if (count == 0) return std::string("no CUDA device found");
  return std::nullopt;
}

void require_gpu() {
  if (auto why = gpu_unavailable_reason()) KF_RUNTIME_ERROR("%s", why->c_str());
}

DeviceInfo query_device(int ordinal) {
  require_gpu();
  DeviceInfo d;
  d.ordinal = ordinal;
  cudaDeviceProp p{};
  KF_CUDA(cudaGetDeviceProperties(&p, ordinal));
  KF_CUDA(cudaSetDevice(ordinal));
  d.name = p.name;
  const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  d.uuid = strf("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = size_t(p.l2CacheSize);
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  d.mem_bus_bits = p.memoryBusWidth;
  KF_CUDA(cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, ordinal));
  KF_CUDA(cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal));
  KF_CUDA(cudaMemGetInfo(&d.mem_free, &d.mem_total));
  KF_CUDA(cudaDriverGetVersion(&d.driver_version));
  KF_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

nlohmann::json to_json(const DeviceInfo& d) {
  return {{"ordinal", d.ordinal},
          {"name", d.name},
          {"uuid", d.uuid},
          {"arch", d.arch()},
          {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes},
          {"mem_total", d.mem_total},
          {"driver", cuda_version_string(d.driver_version)},
          {"runtime", cuda_version_string(d.runtime_version)}};
}

}  // namespace kforge
