// y = x W^T on the GPU through cuBLASLt: W is BF16 [n, k] row-major (= column-major [k, n], used
// with TRANSA), x is rounded to BF16 into a staging buffer, accumulation and output are fp32
// (CUBLAS_COMPUTE_32F, fp32 alpha/beta). In cuBLAS's column-major terms the product is
// y^T [n, m] = op(A) [n, k] * B [k, m], A = W, B = x^T. One heuristic algorithm is cached per
// (m, n, k, pointer alignment). Bytes: n*k*2 (W) + m*k*(4+2+2) (x, staging) + m*n*4 (y, x2 if beta=1).
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>

#include <map>
#include <string>
#include <tuple>

#include "common/error.h"
#include "kernels/elementwise.h"
#include "kernels/linear.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_fp8.h"
#include "kernels/sm90a/linear_fp8_wgmma.h"
#include "kernels/linear_fp8_tma.h"
#include "kernels/launch.cuh"

// CUBLASLT_CHECK(expr): throws glm5::Error naming the call, file:line and the cuBLASLt status.
#define CUBLASLT_CHECK(expr)                                                                           \
  do {                                                                                                 \
    cublasStatus_t glm5_status_ = (expr);                                                              \
    if (glm5_status_ != CUBLAS_STATUS_SUCCESS)                                                         \
      throw ::glm5::Error(std::string("cuBLASLt call ") + #expr + " failed at " + __FILE__ + ":" +     \
                          std::to_string(__LINE__) + ": " + cublasLtGetStatusName(glm5_status_) + " (" + \
                          cublasLtGetStatusString(glm5_status_) + ")");                                \
  } while (0)

namespace glm5 {

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;  // 32 MiB

// Largest power of two (<= 256) dividing the address: cuBLASLt's algorithms need it known.
uint32_t alignment_of(const void* ptr) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(ptr) % a != 0) a >>= 1;
  return a;
}
}  // namespace

// One shape's descriptors and chosen algorithm.
struct LinearPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// hi[i] = bf16(x[i]); lo[i] = bf16(x[i] - hi[i]); hi occupies [0, n), lo [n, 2n) of `out`.
__global__ void split_bf16_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ out, int64_t n) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const __nv_bfloat16 hi = __float2bfloat16_rn(v);
    out[i] = hi;
    out[n + i] = __float2bfloat16_rn(v - __bfloat162float(hi));
  }
}

// y[r, c] = (accumulate ? y[r, c] : 0) + y2[r, c] + y2[m + r, c]
__global__ void sum_split_rows_kernel(const float* __restrict__ y2, float* __restrict__ y, int64_t mn, bool accumulate) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < mn; i += int64_t(gridDim.x) * blockDim.x) {
    const float s = y2[i] + y2[mn + i];
    y[i] = accumulate ? y[i] + s : s;
  }
}

// y[t, r] = (accumulate ? y[t, r] : 0) + d[r * m + t] (d: BF16, column-major [m, n]).
__global__ void add_transposed_bf16_kernel(const uint16_t* __restrict__ d, float* __restrict__ y, int m, int n,
                                           bool accumulate) {
  pdl_begin();
  const int64_t mn = int64_t(m) * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < mn; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / n, r = i % n;
    const float v = __bfloat162float(__ushort_as_bfloat16(d[r * m + t]));
    y[i] = accumulate ? y[i] + v : v;
  }
}

int grid_for(int64_t n) { return int(std::min<int64_t>((n + 255) / 256, 4096)); }

struct LinearContext::Impl {
  // A device buffer of at least `elems` T, reallocated (contents lost; zeroed when `zero`) when short.
  template <class T>
  static T* grow(T*& ptr, size_t& have, size_t elems, bool zero = false) {
    if (elems > have) {
      if (ptr) CUDA_CHECK(cudaFree(ptr));
      ptr = nullptr;
      CUDA_CHECK(cudaMalloc(&ptr, elems * sizeof(T)));
      if (zero) {
        // cudaMemset runs on the legacy default stream, which the engine's non-blocking streams do not wait for: the
        // first kernel on a fresh buffer could count on memory not yet zeroed (session 23's review). Growth happens
        // in eager warm-up steps only (a capture cannot allocate), so the wait costs nothing per step.
        CUDA_CHECK(cudaMemset(ptr, 0, elems * sizeof(T)));
        CUDA_CHECK(cudaDeviceSynchronize());
      }
      have = elems;
    }
    return ptr;
  }

  float* split_out = nullptr;  // [2m, n] fp32 output of split_bf16 GEMMs, grown on demand
  size_t split_out_elems = 0;
  float* split_out_for(size_t elems) { return grow(split_out, split_out_elems, elems); }
  // Zeroed tile counters of the FP8 GEMV's in-kernel split-K sum (linear_fp8_gemv_cuda), grown on
  // demand (outside graph capture: the engine runs eager steps first); every GEMV leaves them zero.
  int* tile_counters = nullptr;
  size_t tile_counter_elems = 0;
  int* counters_for(size_t elems) { return grow(tile_counters, tile_counter_elems, elems, true); }

  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  uint16_t* staging = nullptr;  // bf16 copy of x, grown on demand
  size_t staging_elems = 0;
  uint8_t* x_fp8 = nullptr;  // FP8 activations and their scales (block-scaled and Wgmma paths), grown on demand
  float* x_fp8_scale = nullptr;
  size_t x_fp8_elems = 0, x_fp8_scale_elems = 0;
  std::map<std::tuple<int, int, int, uint32_t, uint32_t>, LinearPlan> fp8_plans;

  // Codes of `elems` bytes and `scales` floats (default: one per 128 codes, + 1).
  void x_fp8_for(size_t elems, size_t scales = 0) {
    grow(x_fp8, x_fp8_elems, elems);
    grow(x_fp8_scale, x_fp8_scale_elems, scales ? scales : elems / 128 + 1);
  }

  // The heuristic's first algorithm for pl (descriptors set) under the workspace and the pointers'
  // alignments (bytes) into pl.algo; CUBLAS_STATUS_NOT_SUPPORTED when it returns none.
  cublasStatus_t pick_algo(LinearPlan& pl, uint32_t align_a, uint32_t align_b, uint32_t align_c) {
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kWorkspaceBytes;
    CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
    CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
    CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
    CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, pl.desc, pl.a, pl.b, pl.c, pl.c, pref, 1, &result, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS && returned == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (st == CUBLAS_STATUS_SUCCESS) pl.algo = result.algo;
    return st;
  }

  // cuBLASLt block-scaled FP8 plan, with the operand roles of NVIDIA's LtBlk128x128Fp8Matmul sample:
  // A = x (e4m3, [k, m] column-major, TRANSA, VEC128_32F scales), B = W (e4m3, [k, n] column-major =
  // our row-major [n, k], BLK128x128_32F scales as stored), D = x W^T in BF16, column-major [m, n]
  // (= y transposed); scale pointers are set per call. Returns null when cuBLASLt has no algorithm.
  LinearPlan* fp8_plan(int m, int n, int k, uint32_t align_w) {
    auto key = std::make_tuple(m, n, k, align_w, uint32_t(0));
    auto it = fp8_plans.find(key);
    if (it != fp8_plans.end()) return it->second.desc ? &it->second : nullptr;
    LinearPlan pl;
    CUBLASLT_CHECK(cublasLtMatmulDescCreate(&pl.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    const cublasLtMatmulMatrixScale_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                                      b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
    CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
    CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl.a, CUDA_R_8F_E4M3, k, m, k));
    CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl.b, CUDA_R_8F_E4M3, k, n, k));
    CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl.c, CUDA_R_16BF, m, n, m));
    if (pick_algo(pl, 256, align_w, 256) != CUBLAS_STATUS_SUCCESS) {  // x_fp8 and the BF16 output: cudaMalloc
      destroy(pl);
      fp8_plans.emplace(key, LinearPlan{});  // remembered as unsupported
      return nullptr;
    }
    return &fp8_plans.emplace(key, pl).first->second;
  }

  uint16_t* d_bf16 = nullptr;  // BF16 output of the block-scaled GEMM, [n][m], grown on demand
  size_t d_bf16_elems = 0;
  uint16_t* d_bf16_for(size_t elems) {
    if (elems > d_bf16_elems) {
      if (d_bf16) CUDA_CHECK(cudaFree(d_bf16));
      d_bf16 = nullptr;
      CUDA_CHECK(cudaMalloc(&d_bf16, elems * sizeof(uint16_t)));
      d_bf16_elems = elems;
    }
    return d_bf16;
  }

  uint16_t* w_staging = nullptr;  // bf16 copy of an FP8 weight (large-m FP8 path), grown on demand
  size_t w_staging_elems = 0;

  uint16_t* w_staging_for(size_t elems) {
    if (elems > w_staging_elems) {
      if (w_staging) CUDA_CHECK(cudaFree(w_staging));
      w_staging = nullptr;
      CUDA_CHECK(cudaMalloc(&w_staging, elems * sizeof(uint16_t)));
      w_staging_elems = elems;
    }
    return w_staging;
  }
  std::map<std::tuple<int, int, int, int, uint32_t, uint32_t>, LinearPlan> plans;

  // Handle and workspace are made on first use, so a LinearContext costs nothing on a CPU run.
  void init() {
    if (handle) return;
    CUBLASLT_CHECK(cublasLtCreate(&handle));
    CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  }

  uint16_t* staging_for(size_t elems) {
    if (elems > staging_elems) {
      if (staging) CUDA_CHECK(cudaFree(staging));  // cudaFree waits for work using it
      staging = nullptr;
      CUDA_CHECK(cudaMalloc(&staging, elems * sizeof(uint16_t)));
      staging_elems = elems;
    }
    return staging;
  }

  const LinearPlan& plan(int m, int n, int k, int ldw, uint32_t align_w, uint32_t align_y) {
    auto key = std::make_tuple(m, n, k, ldw, align_w, align_y);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    LinearPlan pl;
    CUBLASLT_CHECK(cublasLtMatmulDescCreate(&pl.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
    CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
    CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl.a, CUDA_R_16BF, k, n, ldw));  // W: column-major [k, n], ld ldw
    CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl.b, CUDA_R_16BF, k, m, k));  // x: column-major [k, m]
    CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&pl.c, CUDA_R_32F, n, m, n));   // y: column-major [n, m]
    const cublasStatus_t st = pick_algo(pl, align_w, 256, align_y);  // staging comes from cudaMalloc
    if (st != CUBLAS_STATUS_SUCCESS) {
      destroy(pl);
      throw Error("linear_cuda: cuBLASLt found no algorithm for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                  " k=" + std::to_string(k) + " (BF16 x BF16 -> FP32, weight alignment " + std::to_string(align_w) +
                  " bytes): " + cublasLtGetStatusName(st));
    }
    return plans.emplace(key, pl).first->second;
  }

  static void destroy(LinearPlan& pl) {
    if (pl.a) cublasLtMatrixLayoutDestroy(pl.a);
    if (pl.b) cublasLtMatrixLayoutDestroy(pl.b);
    if (pl.c) cublasLtMatrixLayoutDestroy(pl.c);
    if (pl.desc) cublasLtMatmulDescDestroy(pl.desc);
  }

  ~Impl() {  // never throws: errors at teardown are ignored
    for (auto& [key, pl] : plans) destroy(pl);
    for (auto& [key, pl] : fp8_plans) destroy(pl);
    if (x_fp8) cudaFree(x_fp8);
    if (d_bf16) cudaFree(d_bf16);
    if (x_fp8_scale) cudaFree(x_fp8_scale);
    if (staging) cudaFree(staging);
    if (w_staging) cudaFree(w_staging);
    if (split_out) cudaFree(split_out);
    if (tile_counters) cudaFree(tile_counters);
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
  }
};

LinearContext::LinearContext() : impl_(std::make_unique<Impl>()) {}
LinearContext::~LinearContext() = default;

namespace {
// linear_cuda's choice for FP8 weights: the tensor-core kernel, the GEMV, or the large-m paths.
// Wgmma: fp8_large_m Wgmma and the GEMM supports p (checked here once); LargeM: fp8_large_m's other paths.
enum class Fp8Path { Mma, Gemv, Wgmma, LargeM };
Fp8Path fp8_path(const LinearParams& p, const LinearContext& ctx) {
  if (p.m >= 2 && p.m <= ctx.fp8_mma_max_m && linear_fp8_mma_supported(p)) return Fp8Path::Mma;
  // With the Wgmma large-m path, the GEMV keeps m = 1 only: from 2 tokens on, the tensor-core GEMM (token tiles of
  // 8 and 16) reads W once for all of them, where the GEMV reads it per token group.
  if (ctx.fp8_large_m == LinearContext::Fp8LargeM::Wgmma && (p.m >= 2 || p.m > ctx.fp8_gemv_max_m) &&
      linear_fp8_wgmma_supported(p))
    return Fp8Path::Wgmma;
  return p.m <= ctx.fp8_gemv_max_m ? Fp8Path::Gemv : Fp8Path::LargeM;
}
}  // namespace

bool linear_group_gemv(const LinearGroupParams& g, const LinearContext& ctx) {
  return g.count >= 1 && linear_fp8_gemv_group_supported(g) && fp8_path(g.p[0], ctx) == Fp8Path::Gemv;
}

bool linear_group_fused(const LinearGroupParams& g, const LinearContext& ctx) {
  return g.count >= 2 && linear_group_gemv(g, ctx);
}

bool linear_group_norm_fused(const LinearGroupParams& g, const LinearContext& ctx) {
  return g.norm.weight && linear_group_gemv(g, ctx) && linear_fp8_gemv_norm_supported(g);
}

void linear_group_cuda(const LinearGroupParams& g, LinearContext& ctx, cudaStream_t stream) {
  validate_linear_group(g, "linear_group_cuda", false);
  const bool rope = linear_group_has_rope(g);
  if (rope)
    require(linear_group_gemv(g, ctx), "linear_group_cuda: LinearGroupParams.rope is set but the group does not run as "
                                       "one FP8 GEMV (every projection F8_E4M3 on the GEMV path at this m, sharing x, m and k)");
  if (g.norm.weight)
    require(linear_group_norm_fused(g, ctx),
            "linear_group_cuda: LinearGroupParams.norm is set but the group does not run as one FP8 GEMV (every "
            "projection F8_E4M3 on the GEMV path at this m, sharing x, m and k, the norm weight 16-byte aligned)");
  if (!g.norm.weight && !rope && !linear_group_fused(g, ctx)) {
    for (int s = 0; s < g.count; ++s) linear_cuda(g.p[s], ctx, stream);
    return;
  }
  LinearContext::Impl& impl = *ctx.impl();
  const size_t elems = linear_fp8_gemv_group_partial(g), tiles = linear_fp8_gemv_group_counters(g);
  float* partial = impl.split_out_for(elems);
  LinearGroupParams gl = g;
  gl.l2_lookahead = ctx.fp8_gemv_l2_lookahead;
  linear_fp8_gemv_group_cuda(gl, partial, elems, stream, impl.counters_for(tiles), tiles);
}

void linear_cuda(const LinearParams& params, LinearContext& ctx, cudaStream_t stream) {
  validate_linear_params(params, "linear_cuda", false);
  LinearContext::Impl& impl = *ctx.impl();
  LinearParams p = params;
  if (p.w_dtype == DType::F8_E4M3) {
    const Fp8Path path = fp8_path(p, ctx);
    if (path == Fp8Path::Mma) {
      const size_t elems = size_t(linear_fp8_mma_splits(p)) * p.m * p.n;
      linear_fp8_mma_cuda(p, impl.split_out_for(elems), elems, stream, 0, false, ctx.fp8_mma_pdl);
      return;
    }
    if (path == Fp8Path::Gemv && ctx.fp8_tma_gemv && linear_fp8_tma_supported(p)) {
      const size_t elems = linear_fp8_tma_partial(p), tiles = linear_fp8_tma_counters(p);
      linear_fp8_tma_cuda(p, impl.split_out_for(elems), elems, impl.counters_for(tiles), tiles, stream);
      return;
    }
    if (path == Fp8Path::Gemv) {
      const size_t elems = size_t(linear_fp8_gemv_splits(p)) * p.m * p.n, tiles = linear_fp8_gemv_counters(p);
      float* partial = impl.split_out_for(elems);
      linear_fp8_gemv_cuda(p, partial, elems, stream, impl.counters_for(tiles), tiles, ctx.fp8_gemv_l2_lookahead);
      return;
    }
    if (path == Fp8Path::Wgmma) {
      const Fp8WgmmaPlan q =
          linear_fp8_wgmma_plan(p, current_device_sm_count(), ctx.fp8_wgmma_max_n, ctx.fp8_wgmma_stream_k);
      impl.x_fp8_for(q.x_code_bytes, q.x_scale_floats);
      fp8_quantize_activations_cuda(p.x, p.m, p.k, impl.x_fp8, impl.x_fp8_scale, true, stream, q.x_scale_ld);
      linear_fp8_wgmma_cuda(p, q, impl.x_fp8, impl.x_fp8_scale, impl.split_out_for(q.partial_elems),
                            impl.counters_for(q.counters), stream);
      ++ctx.fp8_wgmma_calls;
      return;
    }
    // Block-scaled cuBLASLt needs a dense weight whose scale rows hold ceil(k/128) rounded up to 4
    // blocks (cuBLASLt's BLK128x128 layout; GLM-5's k = 512 / 2048 / 6144 / 16384 all qualify).
    const int kb = (p.k + 127) / 128;
    const bool dense = p.w_stride() == p.k && p.scale_stride() == (kb + 3) / 4 * 4 && p.k % 128 == 0 &&
                       reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0;
    if (ctx.fp8_large_m == LinearContext::Fp8LargeM::BlockScaled && dense) {
      impl.init();
      if (LinearPlan* pl = impl.fp8_plan(p.m, p.n, p.k, alignment_of(p.w))) {
        impl.x_fp8_for(size_t(p.m) * p.k);
        fp8_quantize_activations_cuda(p.x, p.m, p.k, impl.x_fp8, impl.x_fp8_scale, ctx.act_scale_tokens_fastest, stream);
        const float* xs = impl.x_fp8_scale;
        CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &xs, sizeof(xs)));
        CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(pl->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p.w_scale,
                                                      sizeof(p.w_scale)));
        uint16_t* d = impl.d_bf16_for(size_t(p.m) * p.n);
        const float alpha = 1.f, beta = 0.f;
        CUBLASLT_CHECK(cublasLtMatmul(impl.handle, pl->desc, &alpha, impl.x_fp8, pl->a, p.w, pl->b, &beta, d, pl->c, d,
                                      pl->c, &pl->algo, impl.workspace, kWorkspaceBytes, stream));
        const int64_t mn = int64_t(p.m) * p.n;
        launch_kernel(add_transposed_bf16_kernel, grid_for(mn), 256, 0, stream, d, p.y, p.m, p.n, p.accumulate);
        CUDA_CHECK_LAUNCH();
        ++ctx.fp8_block_scaled_calls;
        return;
      }
    }
    uint16_t* w = impl.w_staging_for(size_t(p.n) * p.k);
    fp8_block_dequant_bf16_cuda(p, w, stream);
    p.w = w;
    p.w_dtype = DType::BF16;
    p.ldw = 0;
    p.w_scale = nullptr;
  }
  if (ctx.bf16_gemv && linear_bf16_gemv_preferred(p)) {  // small BF16 projections at m <= 4: one launch, fp32 x
    linear_bf16_gemv_cuda(p, stream);
    return;
  }
  impl.init();
  if (p.split_bf16) {
    const int64_t mk = int64_t(p.m) * p.k, mn = int64_t(p.m) * p.n;
    uint16_t* x2 = impl.staging_for(size_t(2 * mk));
    launch_kernel(split_bf16_kernel, grid_for(mk), 256, 0, stream, p.x, reinterpret_cast<__nv_bfloat16*>(x2), mk);
    CUDA_CHECK_LAUNCH();
    float* y2 = impl.split_out_for(size_t(2 * mn));
    const LinearPlan& pl = impl.plan(2 * p.m, p.n, p.k, p.w_stride(), alignment_of(p.w), 256);
    const float alpha = 1.f, beta = 0.f;
    CUBLASLT_CHECK(cublasLtMatmul(impl.handle, pl.desc, &alpha, p.w, pl.a, x2, pl.b, &beta, y2, pl.c, y2, pl.c, &pl.algo,
                                  impl.workspace, kWorkspaceBytes, stream));
    launch_kernel(sum_split_rows_kernel, grid_for(mn), 256, 0, stream, y2, p.y, mn, p.accumulate);
    CUDA_CHECK_LAUNCH();
    return;
  }
  uint16_t* x_bf16 = impl.staging_for(size_t(p.m) * p.k);
  f32_to_bf16_cuda(p.x, x_bf16, int64_t(p.m) * p.k, stream);
  const LinearPlan& pl = impl.plan(p.m, p.n, p.k, p.w_stride(), alignment_of(p.w), alignment_of(p.y));
  const float alpha = 1.f, beta = p.accumulate ? 1.f : 0.f;
  CUBLASLT_CHECK(cublasLtMatmul(impl.handle, pl.desc, &alpha, p.w, pl.a, x_bf16, pl.b, &beta, p.y, pl.c, p.y, pl.c,
                                &pl.algo, impl.workspace, kWorkspaceBytes, stream));
}

}  // namespace glm5
