// torch.ops.kforge.hgemm(a, b): the exported kforge_hgemm library as a PyTorch operator (written
// by `kforge hgemm export --torch`). Built by torch.utils.cpp_extension (see __init__.py's load())
// and linked against the export's static library, so the kernels and the tuned table are exactly
// those of this export.
//
//   a: (M, K) CUDA tensor, torch.float16 or torch.bfloat16, row-major (a copy is made of any other strides).
//   b: (K, N) CUDA tensor, same dtype and device: row-major (stride (N, 1): the library's NN
//      layout) or column-major, i.e. the transpose of an (N, K) row-major tensor such as a Linear
//      weight (stride (1, K): layout TN); any other strides are copied to row-major first.
//   returns a new (M, N) row-major tensor of a's dtype, C = A B with fp32 accumulation, enqueued
//   on the current CUDA stream of a's device.
//
// Autograd is a C++ kernel (below): a Python one would add ~10-20 us of interpreter to every call,
// gradients or not. The shape function for torch.compile (fake tensors) is registered from Python
// (__init__.py: torch.library.register_fake), where symbolic sizes come for free.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "kforge_hgemm.h"

namespace {

// One element type of the library: its entry points and the problem's dtype (bf16 problems run
// the library's bf16 variants, fp32 accumulation).
struct DtypeKernels {
  const char* name;
  int (*gemm)(const kforge_hgemm_args*, cudaStream_t);
  size_t (*workspace_size)(const kforge_hgemm_problem*);
  kforge_hgemm_dtype dtype;
};

DtypeKernels kernels_for(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Half:
      return {"fp16", &kforge_hgemm, &kforge_hgemm_workspace_size, KFORGE_HGEMM_F16};
    case c10::ScalarType::BFloat16:
      return {"bf16", &kforge_hgemm, &kforge_hgemm_workspace_size, KFORGE_HGEMM_BF16};
    default:
      TORCH_CHECK_TYPE(false, "kforge::hgemm: dtype ", t,
                       " is not supported: pass torch.float16 or torch.bfloat16 tensors");
  }
  return {};  // not reached
}

// (R, C) stored with leading dimension C: element (i, j) at i*C + j. Strides of size-1 dimensions
// do not matter.
bool row_major(const at::Tensor& t) {
  return (t.size(1) <= 1 || t.stride(1) == 1) && (t.size(0) <= 1 || t.stride(0) == t.size(1));
}
// (R, C) stored as C rows of R: element (i, j) at j*R + i.
bool col_major(const at::Tensor& t) {
  return (t.size(0) <= 1 || t.stride(0) == 1) && (t.size(1) <= 1 || t.stride(1) == t.size(0));
}

// Every refusal, in the order a user fixes them: shapes, dtypes, then devices (so that the CPU
// kernel below reports a bad shape or dtype as such, not only "not CUDA").
DtypeKernels check_args(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2, "kforge::hgemm: a and b must be 2-D (got a ", a.sizes(), ", b ",
                    b.sizes(), "); for N-D inputs use @NAME@_torch.linear, or torch.matmul");
  TORCH_CHECK_VALUE(a.size(1) == b.size(0), "kforge::hgemm: a is (M, K) = ", a.sizes(), " and b is (K, N) = ",
                    b.sizes(), ": their K differ");
  TORCH_CHECK(a.layout() == c10::kStrided && b.layout() == c10::kStrided,
              "kforge::hgemm: a and b must be dense (strided) tensors");
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), "kforge::hgemm: a is ", a.scalar_type(), " and b ",
                   b.scalar_type(), ": both must have the same dtype (torch.float16 or torch.bfloat16)");
  const DtypeKernels k = kernels_for(a.scalar_type());
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "kforge::hgemm: a is on ", a.device(), " and b on ", b.device(),
              ": the op runs on CUDA tensors only (move both with .cuda(), or use torch.matmul on the CPU)");
  TORCH_CHECK(a.device() == b.device(), "kforge::hgemm: a is on ", a.device(), " and b on ", b.device(),
              ": both must be on the same device");
  return k;
}

at::Tensor hgemm_cuda(const at::Tensor& a_in, const at::Tensor& b_in) {
  const DtypeKernels k = check_args(a_in, b_in);
  const c10::cuda::CUDAGuard guard(a_in.device());
  const int64_t m = a_in.size(0), kk = a_in.size(1), n = b_in.size(1);
  at::Tensor c = at::empty({m, n}, a_in.options());
  if (m == 0 || n == 0) return c;
  if (kk == 0) return c.zero_();  // an empty sum, as torch.matmul gives

  const at::Tensor a = row_major(a_in) ? a_in : a_in.contiguous();
  at::Tensor b = b_in;
  kforge_hgemm_layout layout = KFORGE_HGEMM_NN;
  if (row_major(b)) {
    layout = KFORGE_HGEMM_NN;
  } else if (col_major(b)) {
    layout = KFORGE_HGEMM_TN;
  } else {
    b = b.contiguous();  // e.g. a slice with a row stride wider than N
  }

  kforge_hgemm_args args{};
  args.problem = kforge_hgemm_problem{m, n, kk, layout, KFORGE_HGEMM_ACC_F32, k.dtype};
  args.a = a.data_ptr();
  args.b = b.data_ptr();
  args.c = c.data_ptr();
  at::Tensor workspace;
  args.workspace_bytes = k.workspace_size(&args.problem);
  if (args.workspace_bytes > 0) {
    // From the caching allocator on the current stream: reused by later calls, freed in stream order.
    workspace = at::empty({static_cast<int64_t>(args.workspace_bytes)}, a.options().dtype(at::kByte));
    args.workspace = workspace.data_ptr();
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(a.device().index()).stream();
  const int rc = k.gemm(&args, stream);
  TORCH_CHECK(rc == KFORGE_HGEMM_SUCCESS, "kforge::hgemm: kforge_hgemm (", k.name, ") returned ", rc, " (",
              kforge_hgemm_error_string(rc), ") for M=", m, " N=", n, " K=", kk,
              layout == KFORGE_HGEMM_NN ? " layout nn" : " layout tn");
  return c;
}

// CPU tensors: a clear refusal instead of the dispatcher's "could not run ... with arguments from
// the 'CPU' backend".
at::Tensor hgemm_not_cuda(const at::Tensor& a, const at::Tensor& b) {
  check_args(a, b);  // throws: a bad shape or dtype first, else "CUDA tensors only"
  TORCH_CHECK(false, "kforge::hgemm: not a CUDA tensor");
  return {};
}

// The op through the dispatcher (so that backward, and calls below autograd, reach whatever kernel
// the inputs need: CUDA, fake, meta).
at::Tensor call_hgemm(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("kforge::hgemm", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(a, b);
}

// C = A B; dA = dC B^T (b.t() of a row-major B is column-major: the TN layout, no copy), dB = A^T dC
// (A^T is copied to row-major by the op).
class HgemmFunction : public torch::autograd::Function<HgemmFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    const at::AutoDispatchBelowADInplaceOrView below;
    return call_hgemm(a, b);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& a = saved[0];
    const at::Tensor& b = saved[1];
    const at::Tensor& g = grads[0];
    at::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) grad_a = call_hgemm(g, b.t());
    if (ctx->needs_input_grad(1)) grad_b = call_hgemm(a.t(), g);
    return {grad_a, grad_b};
  }
};

at::Tensor hgemm_autograd(const at::Tensor& a, const at::Tensor& b) {
  if (c10::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())) return HgemmFunction::apply(a, b);
  const at::AutoDispatchBelowADInplaceOrView below;  // no graph to record: straight to the kernel
  return call_hgemm(a, b);
}

}  // namespace

TORCH_LIBRARY(kforge, m) {
  m.def("hgemm(Tensor a, Tensor b) -> Tensor");
  // The library linked in, and the variant it runs for a problem on the current device.
  m.def("hgemm_version() -> str", [] { return std::string(kforge_hgemm_version()); });
  m.def("hgemm_variant(int m, int n, int k, bool b_col_major, bool bf16=False) -> str",
        [](int64_t mm, int64_t nn, int64_t kk, bool tn, bool bf16) {
    const kforge_hgemm_problem p{mm, nn, kk, tn ? KFORGE_HGEMM_TN : KFORGE_HGEMM_NN, KFORGE_HGEMM_ACC_F32,
                                 bf16 ? KFORGE_HGEMM_BF16 : KFORGE_HGEMM_F16};
    const char* v = kforge_hgemm_variant_name(&p);
    return std::string(v ? v : "");
  });
}

TORCH_LIBRARY_IMPL(kforge, CUDA, m) { m.impl("hgemm", &hgemm_cuda); }

TORCH_LIBRARY_IMPL(kforge, CPU, m) { m.impl("hgemm", &hgemm_not_cuda); }

TORCH_LIBRARY_IMPL(kforge, Autograd, m) { m.impl("hgemm", &hgemm_autograd); }
