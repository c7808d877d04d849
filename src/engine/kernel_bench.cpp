// Kernel benchmark of kernel_bench.h: ceilings (copy, BF16 GEMM), then the KV-path kernels, each
// checked against its CPU twin before it is timed.
#include "engine/kernel_bench.h"

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/cold_timer.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/rng.h"
#include "kernels/indexer.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernels/kv_layout.h"
#include "kernels/linear.h"
#include "kernels/linear_fp8.h"
#include "kernels/sm90a/linear_fp8_wgmma.h"
#include "kernels/linear_fp8_tma.h"
#include "kernels/moe.h"
#include "kernels/sm90a/moe_fp8_wgmma.h"
#include "kernels/read_stream.h"
#include "kernels/mla_absorb.h"
#include "kernels/mla_decode.h"
#include "kernels/sm90a/mla_decode_wgmma.h"

namespace glm5 {
namespace {

constexpr int kTopk = kKernelBenchTopk;
constexpr int kIndexerHeads = 32, kIndexerDim = 128;

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) | rd();
}

template <class T>
Buffer to_device(const std::vector<T>& v, const char* label) {
  Buffer b(Where::Device, std::max<size_t>(v.size() * sizeof(T), 1), label);
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> to_host(const Buffer& b, size_t n) {
  std::vector<T> v(n);
  b.download(v.data(), n * sizeof(T));
  return v;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The cold-L2 event timer (common/cold_timer.h), shared with the GPU tests and the probes.
using Timer = ColdTimer;

double median(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

struct Ceilings {
  double copy_gbps = 0, bf16_tflops = 0;
  double read_gbps = 0;  // best read_stream shape (not part of the roofline: issue 3's floor is copy / GEMM)
};

KernelBenchRecord make_record(const std::string& kernel, const std::vector<double>& us, double bytes, double flops,
                              const Ceilings& c) {
  KernelBenchRecord r;
  r.kernel = kernel;
  r.median_us = median(us);
  r.min_us = us.front();
  r.max_us = us.back();
  r.reps = int(us.size());
  r.bytes = bytes;
  r.flops = flops;
  const double s = r.median_us * 1e-6;
  r.achieved_gbps = bytes / s / 1e9;
  r.tflops = flops / s / 1e12;
  r.copy_gbps_measured = c.copy_gbps;
  r.bf16_tflops_measured = c.bf16_tflops;
  r.read_gbps_measured = c.read_gbps;
  const double floor_s = std::max(c.copy_gbps > 0 ? bytes / (c.copy_gbps * 1e9) : 0.0,
                                  c.bf16_tflops > 0 ? flops / (c.bf16_tflops * 1e12) : 0.0);
  r.roofline_fraction = floor_s / s;
  return r;
}

void progress(const KernelBenchRecord& r) {
  std::fprintf(stderr, "  %-16s B=%-4d H=%-3d ctx=%-7lld pool=%-7lld %10.1f us %8.0f GB/s %7.1f TFLOP/s %5.1f%%\n",
               r.kernel.c_str(), r.batch, r.heads, (long long)r.context, (long long)r.pool_tokens, r.median_us,
               r.achieved_gbps, r.tflops, 100.0 * r.roofline_fraction);
}

// ---------------------------------------------------------------------------------------------
// Ceilings

void check_lt(cublasStatus_t st, const char* what) {
  require(st == CUBLAS_STATUS_SUCCESS, std::string("bench gemm_bf16: ") + what + " failed with cuBLAS status " +
                                           std::to_string(int(st)));
}

// `n` bf16 values ~ N(0,1)-like from (seed, stream), generated once as a 1 Mi pattern and repeated.
void fill_bf16_device(void* dst, size_t n, uint64_t seed, uint64_t stream) {
  const size_t pattern = std::min<size_t>(n, size_t(1) << 20);
  std::vector<uint16_t> h(pattern);
  for (size_t i = 0; i < pattern; ++i) h[i] = float_to_bf16_bits(rng_normal(seed, stream, i));
  for (size_t off = 0; off < n; off += pattern) {
    const size_t len = std::min(pattern, n - off);
    CUDA_CHECK(cudaMemcpy(static_cast<uint16_t*>(dst) + off, h.data(), len * 2, cudaMemcpyHostToDevice));
  }
}

Ceilings measure_ceilings(cudaStream_t stream, Timer& timer, std::vector<KernelBenchRecord>& out) {
  Ceilings c;
  {
    const size_t bytes = size_t(1) << 30;
    Buffer src(Where::Device, bytes, "bench copy source"), dst(Where::Device, bytes, "bench copy destination");
    CUDA_CHECK(cudaMemset(src.data(), 0x5a, bytes));
    std::vector<double> us = timer.time(
        [&] { CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream)); });
    c.copy_gbps = 2.0 * bytes / (median(us) * 1e-6) / 1e9;
    KernelBenchRecord r = make_record("copy_d2d", us, 2.0 * bytes, 0, c);
    r.check = "cudaMemcpyAsync D2D of 1 GiB; bytes = read + written";
    out.push_back(r);
    // The read ceiling (kernels/read_stream.h): the same 1 GiB read by a kernel that only reads, in a few launch
    // shapes; each shape's XOR is first checked against the CPU twin on 16 MB of fresh random words. The best
    // median is Ceilings::read_gbps, what a weight stream (the batch-1 GEMVs, the MoE experts) could reach.
    const uint64_t seed = fresh_seed();
    std::vector<uint32_t> words(size_t(4) << 20);
    for (size_t i = 0; i < words.size(); ++i) words[i] = uint32_t(splitmix64(seed ^ splitmix64(i)));
    Buffer small = to_device(words, "bench read_stream check input"), sink(Where::Device, 4, "bench read_stream sink");
    ReadStreamParams cp;
    cp.src = words.data();
    cp.bytes = words.size() * 4;
    cp.sink = words.data();
    const uint32_t want = read_stream_xor_cpu(cp);
    // One launch into a zeroed sink, read back: the XOR it computed.
    auto xor_of = [&](const std::function<void()>& launch) {
      CUDA_CHECK(cudaMemset(sink.data(), 0, 4));
      launch();
      CUDA_CHECK(cudaStreamSynchronize(stream));
      return to_host<uint32_t>(sink, 1)[0];
    };
    struct Shape {
      int ctas, threads, unroll;
    };
    for (const Shape sh : {Shape{1, 1024, 4}, Shape{2, 512, 8}, Shape{2, 256, 8}, Shape{2, 256, 16}, Shape{4, 256, 8},
                           Shape{8, 256, 4}}) {
      ReadStreamParams p;
      p.src = small.data();
      p.bytes = cp.bytes;
      p.sink = sink.as<uint32_t>();
      p.ctas_per_sm = sh.ctas;
      p.threads = sh.threads;
      p.unroll = sh.unroll;
      const uint32_t got = xor_of([&] { read_stream_cuda(p, stream); });
      require(got == want, "bench read_stream: XOR " + std::to_string(got) + " != CPU twin " + std::to_string(want) +
                               " (" + std::to_string(sh.ctas) + " CTAs/SM x " + std::to_string(sh.threads) +
                               " threads, unroll " + std::to_string(sh.unroll) + ")");
      p.src = src.data();
      p.bytes = bytes;
      std::vector<double> rus = timer.time([&] { read_stream_cuda(p, stream); });
      KernelBenchRecord rr = make_record("read_stream", rus, double(bytes), 0, c);
      rr.check = "XOR = CPU twin (16 MB random); " + std::to_string(sh.ctas) + " CTAs/SM x " +
                 std::to_string(sh.threads) + " threads, " + std::to_string(sh.unroll) + " x 16 B in flight per thread";
      c.read_gbps = std::max(c.read_gbps, rr.achieved_gbps);
      out.push_back(rr);
      // One shape also at the sizes of GLM-5's batch-1 MoE launches (8 experts' gate+up: 192 MiB, down: 96 MiB):
      // what one launch of that size loses to its ramp and tail. Not part of the ceiling.
      if (sh.ctas == 2 && sh.threads == 256 && sh.unroll == 8)
        for (const size_t part : {size_t(192) << 20, size_t(96) << 20}) {
          p.bytes = part;
          std::vector<double> pus = timer.time([&] { read_stream_cuda(p, stream); });
          KernelBenchRecord pr = make_record("read_stream", pus, double(part), 0, c);
          pr.check = rr.check + "; " + std::to_string(part >> 20) + " MiB (one batch-1 MoE launch's weights)";
          out.push_back(pr);
        }
    }
    // The same read in the batch-1 MoE kernels' access pattern, no math (read_rows_cuda): GLM-5 gate_up (6144-byte
    // rows, 8 experts x 2 x 2048 rows = 192 MiB) and down (2048-byte rows, 96 MiB); a warp walks R rows together,
    // U x 512 B per row per step; with ~100 KB of unused shared memory per CTA the SM holds 2 CTAs of 256 threads,
    // as the MoE kernels (S17: whether their ~63 / 39 us against a plain read's ~52 / 29 us is the pattern and
    // occupancy, or their math). Each shape's XOR is checked against the CPU twin on 12 MiB of fresh random words.
    struct RowShape {
      int row_bytes, R, U, pad_kb;
    };
    for (const RowShape sh : {RowShape{6144, 4, 2, 100}, RowShape{6144, 4, 2, 0}, RowShape{6144, 4, 4, 100},
                              RowShape{6144, 1, 8, 100}, RowShape{6144, 16 / 2, 1, 100}, RowShape{2048, 4, 2, 100},
                              RowShape{2048, 4, 2, 0}}) {
      ReadRowsParams rp;
      rp.s.src = small.data();
      rp.s.bytes = size_t(6144) * 2048;  // a multiple of both row lengths
      rp.s.sink = sink.as<uint32_t>();
      rp.s.threads = 256;
      rp.s.unroll = sh.U;
      rp.row_bytes = sh.row_bytes;
      rp.rows_per_warp = sh.R;
      rp.smem_pad = sh.pad_kb * 1024;
      ReadStreamParams cc = cp;
      cc.bytes = rp.s.bytes;
      const uint32_t want_rows = read_stream_xor_cpu(cc);
      const uint32_t got_rows = xor_of([&] { read_rows_cuda(rp, stream); });
      const std::string shape = std::to_string(sh.row_bytes) + "-byte rows, " + std::to_string(sh.R) + " per warp, " +
                                std::to_string(sh.U) + " x 512 B per row per step, " +
                                (sh.pad_kb ? "2 CTAs of 256 threads per SM" : "no residency limit");
      require(got_rows == want_rows, "bench read_rows: XOR != CPU twin (" + shape + ")");
      rp.s.src = src.data();
      rp.s.bytes = size_t(sh.row_bytes == 6144 ? 192 : 96) << 20;
      std::vector<double> rus = timer.time([&] { read_rows_cuda(rp, stream); });
      KernelBenchRecord rr = make_record("read_rows", rus, double(rp.s.bytes), 0, c);
      rr.check = "XOR = CPU twin (12 MiB random); " + shape;
      out.push_back(rr);
    }
  }
  {
    const int n = 8192;
    const size_t elems = size_t(n) * n;
    Buffer a(Where::Device, elems * 2, "bench gemm A"), b(Where::Device, elems * 2, "bench gemm B"),
        d(Where::Device, elems * 2, "bench gemm D");
    const size_t ws_bytes = size_t(64) << 20;
    Buffer ws(Where::Device, ws_bytes, "bench gemm workspace");
    const uint64_t seed = fresh_seed();
    fill_bf16_device(a.data(), elems, seed, 1);
    fill_bf16_device(b.data(), elems, seed, 2);
    cublasLtHandle_t h = nullptr;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    std::vector<double> us;
    try {
      check_lt(cublasLtCreate(&h), "cublasLtCreate");
      check_lt(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;  // D[m,n] = A[k,m]^T B[k,n], column-major
      check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "set TRANSA");
      check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "set TRANSB");
      check_lt(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n), "layout A");
      check_lt(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n), "layout B");
      check_lt(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n), "layout D");
      check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                    sizeof ws_bytes),
               "set workspace");
      cublasLtMatmulHeuristicResult_t res{};
      int found = 0;
      check_lt(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found), "heuristic");
      require(found > 0, "bench gemm_bf16: cuBLASLt found no algorithm for a BF16 8192^3 GEMM");
      const float alpha = 1.f, beta = 0.f;
      us = timer.time([&] {
        check_lt(cublasLtMatmul(h, op, &alpha, a.data(), la, b.data(), lb, &beta, d.data(), ld, d.data(), ld, &res.algo,
                                ws.data(), ws_bytes, stream),
                 "cublasLtMatmul");
      });
    } catch (...) {
      if (pref) cublasLtMatmulPreferenceDestroy(pref);
      if (ld) cublasLtMatrixLayoutDestroy(ld);
      if (lb) cublasLtMatrixLayoutDestroy(lb);
      if (la) cublasLtMatrixLayoutDestroy(la);
      if (op) cublasLtMatmulDescDestroy(op);
      if (h) cublasLtDestroy(h);
      throw;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
    const double flops = 2.0 * n * double(n) * n;
    c.bf16_tflops = flops / (median(us) * 1e-6) / 1e12;
    KernelBenchRecord r = make_record("gemm_bf16", us, 3.0 * elems * 2, flops, c);
    r.check = "cuBLASLt BF16 8192x8192x8192, fp32 accumulation, BF16 out";
    out.push_back(r);
  }
  for (auto& r : out) {  // the copy record was made before the GEMM ceiling was known
    r.bf16_tflops_measured = c.bf16_tflops;
    r.read_gbps_measured = c.read_gbps;
    r.roofline_fraction = std::max(r.bytes / (c.copy_gbps * 1e9), r.flops / (c.bf16_tflops * 1e12)) / (r.median_us * 1e-6);
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// KV casts

void check_casts(cudaStream_t stream) {
  const uint64_t seed = fresh_seed();
  const LatentLayout l = make_latent_layout(512, 64, true);
  const int rows = 1000, W = l.latent_dim + l.rope_dim;
  std::vector<uint8_t> pool(size_t(rows) * l.row_bytes);
  kv_fill_random_cpu({pool.data(), l, nullptr, {}, 0, rows, seed});
  Buffer d_pool = to_device(pool, "check pool");
  std::vector<uint16_t> want(size_t(rows) * W);
  kv_cast_cpu({pool.data(), l, want.data(), rows});
  Buffer d_out(Where::Device, want.size() * 2, "check bf16 pool");
  kv_cast_cuda({d_pool.as<uint8_t>(), l, d_out.as<uint16_t>(), rows}, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<uint16_t> got = to_host<uint16_t>(d_out, want.size());
  for (size_t i = 0; i < want.size(); ++i)
    require(got[i] == want[i], "bench kv_cast: GPU value " + std::to_string(i % W) + " of row " +
                                   std::to_string(i / W) + " differs from the CPU twin (seed " + std::to_string(seed) +
                                   "); not timed");
  std::vector<int32_t> idx(777);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i % 11 == 3 ? -1 : std::min(int32_t(rng_uniform(seed, 5, i) * rows), int32_t(rows - 1));
  std::vector<uint16_t> gwant(idx.size() * W);
  std::vector<int32_t> cwant(idx.size());
  kv_gather_cast_cpu({pool.data(), l, idx.data(), gwant.data(), cwant.data(), int64_t(idx.size())});
  Buffer d_idx = to_device(idx, "check indices"), d_cidx(Where::Device, idx.size() * 4, "check compact");
  kv_gather_cast_cuda({d_pool.as<uint8_t>(), l, d_idx.as<int32_t>(), d_out.as<uint16_t>(), d_cidx.as<int32_t>(),
                       int64_t(idx.size())},
                      stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<uint16_t> ggot = to_host<uint16_t>(d_out, gwant.size());
  std::vector<int32_t> cgot = to_host<int32_t>(d_cidx, idx.size());
  require(cgot == cwant, "bench kv_gather_cast: compact indices differ from the CPU twin (seed " +
                             std::to_string(seed) + "); not timed");
  for (size_t i = 0; i < gwant.size(); ++i)
    require(ggot[i] == gwant[i], "bench kv_gather_cast: GPU value " + std::to_string(i % W) + " of gathered row " +
                                     std::to_string(i / W) + " differs from the CPU twin (seed " +
                                     std::to_string(seed) + "); not timed");
}

// Random pool slots for `B` requests of `topk` each (distinct within a request when the pool allows).
std::vector<int32_t> random_indices(int B, int topk, int64_t rows, uint64_t seed) {
  std::vector<int32_t> idx(size_t(B) * topk);
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int64_t> u(0, rows - 1);
  std::vector<int32_t> perm;
  for (int b = 0; b < B; ++b) {
    if (rows >= 4 * topk) {
      for (int j = 0; j < topk; ++j) idx[size_t(b) * topk + j] = int32_t(u(g));
    } else {
      perm.resize(rows);
      for (int64_t i = 0; i < rows; ++i) perm[i] = int32_t(i);
      std::shuffle(perm.begin(), perm.end(), g);
      for (int j = 0; j < topk; ++j) idx[size_t(b) * topk + j] = perm[j % rows];
    }
  }
  return idx;
}

// ---------------------------------------------------------------------------------------------
// MLA decode

struct MlaInputs {
  Buffer q_latent, q_rope, indices, out, lse, workspace;
};

MlaDecodeParams mla_params(const MlaInputs& in, const uint8_t* kv, const LatentLayout& l, int B, int H, int topk) {
  MlaDecodeParams p;
  p.q_latent = in.q_latent.as<float>();
  p.q_rope = in.q_rope.as<float>();
  p.q_rope_row_stride = H * l.rope_dim;
  p.q_rope_head_stride = l.rope_dim;
  p.kv = kv;
  p.layout = l;
  p.indices = in.indices.as<int32_t>();
  p.out = in.out.as<float>();
  p.lse = in.lse.as<float>();
  p.B = B;
  p.H = H;
  p.topk = topk;
  p.scale = 1.f / std::sqrt(float(l.latent_dim + l.rope_dim));
  p.workspace = in.workspace.bytes() > 1 ? in.workspace.as<float>() : nullptr;
  p.workspace_bytes = p.workspace ? in.workspace.bytes() : 0;
  return p;
}

MlaInputs make_mla_inputs(int B, int H, int topk, const LatentLayout& l, const std::vector<int32_t>& idx,
                          uint64_t seed) {
  std::vector<float> ql(size_t(B) * H * l.latent_dim), qr(size_t(B) * H * l.rope_dim);
  for (size_t i = 0; i < ql.size(); ++i) ql[i] = rng_normal(seed, 41, i);
  for (size_t i = 0; i < qr.size(); ++i) qr[i] = rng_normal(seed, 42, i);
  MlaInputs in;
  in.q_latent = to_device(ql, "bench q_latent");
  in.q_rope = to_device(qr, "bench q_rope");
  in.indices = to_device(idx, "bench indices");
  in.out = Buffer(Where::Device, size_t(B) * H * l.latent_dim * 4, "bench mla out");
  in.lse = Buffer(Where::Device, size_t(B) * H * 4, "bench mla lse");
  in.workspace = Buffer(Where::Device, std::max<size_t>(mla_decode_workspace_bytes(B, H, topk, l.latent_dim), 1),
                        "bench mla split-K workspace");
  return in;
}

// fp8 and bf16 (cast pool) mla_decode vs the CPU twin on a small pool, both head counts.
std::string check_mla(cudaStream_t stream) {
  double worst = 0;
  for (int H : {64, 16, 128}) {  // 128: two head blocks, the wgmma kernel's crossover form (v 5, 6 below)
    const uint64_t seed = fresh_seed();
    const LatentLayout l = make_latent_layout(512, 64, true);
    const int rows = 4096, B = 3, topk = 512;
    std::vector<uint8_t> pool(size_t(rows) * l.row_bytes);
    kv_fill_random_cpu({pool.data(), l, nullptr, {}, 0, rows, seed});
    std::vector<int32_t> idx = random_indices(B, topk, rows, seed);
    for (size_t i = 0; i < idx.size(); i += 13) idx[i] = -1;
    MlaInputs in = make_mla_inputs(B, H, topk, l, idx, seed);
    // The tensor-core kernel rounds Q to bf16 (and P for P . V): the twin gets the same bf16 Q, and
    // out may differ by the P rounding, <= 2^-8 * max|V| (2^-7 allowed), lse to fp32 order.
    // The fp16-operand wgmma kernel (WgmmaF16) against the twin's fp16 mode fed the fp16 Q (want16): out within
    // its P rounding, <= 2^-11 * max|V| (2^-10 allowed), lse to fp32 order.
    const std::vector<float> ql32 = to_host<float>(in.q_latent, size_t(B) * H * l.latent_dim);
    const std::vector<float> qr32 = to_host<float>(in.q_rope, size_t(B) * H * l.rope_dim);
    std::vector<float> ql = ql32, qr = qr32, ql16 = ql32, qr16 = qr32;
    for (float& x : ql) x = round_bf16(x);
    for (float& x : qr) x = round_bf16(x);
    for (float& x : ql16) x = round_f16(x);
    for (float& x : qr16) x = round_f16(x);
    double max_v = 0;
    std::vector<uint16_t> vrow(l.latent_dim + l.rope_dim);
    for (int r = 0; r < rows; ++r) {
      dequant_latent_row_bf16(pool.data() + size_t(r) * l.row_bytes, l, vrow.data());
      for (int i = 0; i < l.latent_dim; ++i) max_v = std::max(max_v, double(std::fabs(bf16_bits_to_float(vrow[i]))));
    }
    const double tol_rel = std::ldexp(max_v, -7) / std::max(1.0, max_v) + 1e-5;
    const double tol_rel16 = std::ldexp(max_v, -10) / std::max(1.0, max_v) + 1e-5;
    std::vector<float> want(size_t(B) * H * l.latent_dim), want_lse(size_t(B) * H);
    MlaDecodeParams hp;
    hp.q_latent = ql.data();
    hp.q_rope = qr.data();
    hp.q_rope_row_stride = H * l.rope_dim;
    hp.q_rope_head_stride = l.rope_dim;
    hp.kv = pool.data();
    hp.layout = l;
    hp.indices = idx.data();
    hp.out = want.data();
    hp.lse = want_lse.data();
    hp.B = B;
    hp.H = H;
    hp.topk = topk;
    hp.scale = 1.f / std::sqrt(float(l.latent_dim + l.rope_dim));
    mla_decode_cpu(hp);
    std::vector<float> want16(want.size()), want16_lse(want_lse.size());
    hp.q_latent = ql16.data();
    hp.q_rope = qr16.data();
    hp.out = want16.data();
    hp.lse = want16_lse.data();
    hp.kernel = MlaDecodeKernel::WgmmaF16;  // the twin's fp16 K / V values
    mla_decode_cpu(hp);
    Buffer d_pool = to_device(pool, "check pool");
    Buffer d_bf16(Where::Device, size_t(rows) * 2 * (l.latent_dim + l.rope_dim), "check bf16 pool");
    kv_cast_cuda({d_pool.as<uint8_t>(), l, d_bf16.as<uint16_t>(), rows}, stream);
    // fp8 / bf16 rows x the default kernel / the sm_90a wgmma kernel; WgmmaF16 (v 4); at 128 heads the wgmma kernel's
    // crossover form on FP8 rows, bf16 (v 5) and fp16 operands (v 6; S = 8 here: no cluster merge).
    for (int v = 0; v < 7; ++v) {
      const bool xo = v >= 5, fp8 = v % 2 == 0 || xo, wg = v >= 2, f16 = v == 4 || v == 6;
      if (xo && H != 128) continue;
      const LatentLayout kl = fp8 ? l : bf16_layout_of(l);
      MlaDecodeParams p = mla_params(in, fp8 ? d_pool.as<uint8_t>() : d_bf16.as<uint8_t>(), kl, B, H, topk);
      if (wg && !mla_decode_wgmma_supported(p)) continue;
      if (wg) p.kernel = f16 ? MlaDecodeKernel::WgmmaF16 : MlaDecodeKernel::Wgmma;
      p.crossover = xo ? 2 : 0;
      mla_decode_cuda(p, stream);
      const std::vector<float>& want_v = f16 ? want16 : want;
      const std::vector<float>& want_v_lse = f16 ? want16_lse : want_lse;
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<float> got = to_host<float>(in.out, want.size()), got_lse = to_host<float>(in.lse, want_lse.size());
      double max_abs = 0, max_ref = 0, max_lse = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        max_abs = std::max(max_abs, double(std::fabs(got[i] - want_v[i])));
        max_ref = std::max(max_ref, double(std::fabs(want_v[i])));
      }
      for (size_t i = 0; i < want_lse.size(); ++i)
        max_lse = std::max(max_lse, double(std::fabs(got_lse[i] - want_v_lse[i])));
      const double rel = max_abs / std::max(1.0, max_v);
      const double tol_rel_v = f16 ? tol_rel16 : tol_rel, tol_lse = 1e-4;
      require(rel <= tol_rel_v && max_lse <= tol_lse,
              std::string("bench mla_decode ") + (fp8 ? "fp8" : "bf16") + (wg ? " wgmma" : "") + (f16 ? " f16" : "") +
                  (xo ? " crossover" : "") +
                  " H=" + std::to_string(H) + ": max abs error " + sci(max_abs) + " (max |V| " + sci(max_v) +
                  ", max |out| " + sci(max_ref) + "), lse error " + sci(max_lse) + " vs the CPU twin with " +
                  (f16 ? "fp16 Q, K and V" : "bf16 Q") + ", expected <= " +
                  sci(tol_rel_v * std::max(1.0, max_v)) + " and " + sci(tol_lse) + " (seed " + std::to_string(seed) +
                  "); not timed");
      worst = std::max(worst, std::max(rel, max_lse));
    }
  }
  return "max err " + sci(worst) + " (out rel. to max|V|, lse abs) vs CPU twin with bf16 Q (B=3, topk 512, H 64, 16 and "
         "128; default and wgmma kernels, the latter's crossover form at 128; the fp16-operand wgmma kernel vs the twin's "
         "fp16 mode)";
}

// ---------------------------------------------------------------------------------------------
// Indexer

std::vector<int32_t> shuffled_pages(int B, int max_pages, uint64_t seed) {
  std::vector<int32_t> pages(size_t(B) * max_pages);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = int32_t(i);
  std::mt19937_64 g(seed);
  std::shuffle(pages.begin(), pages.end(), g);
  return pages;
}

std::string check_indexer(cudaStream_t stream) {
  const uint64_t seed = fresh_seed();
  const int B = 2, max_pages = 20, Hi = kIndexerHeads, D = kIndexerDim;
  const IndexerLayout il{D, true};
  std::vector<int32_t> bt = shuffled_pages(B, max_pages, seed);
  const int slots_n = B * max_pages * kPageSize;
  std::vector<uint8_t> cache(size_t(B) * max_pages * il.page_bytes());
  std::vector<float> keys(size_t(slots_n) * D);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = rng_normal(seed, 21, i);
  std::vector<int32_t> slots(slots_n);
  for (int s = 0; s < slots_n; ++s) slots[s] = s;
  indexer_key_write_cpu({keys.data(), slots.data(), cache.data(), il, slots_n});
  std::vector<float> q(size_t(B) * Hi * D), w(size_t(B) * Hi);
  for (size_t i = 0; i < q.size(); ++i) q[i] = rng_normal(seed, 22, i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = rng_normal(seed, 23, i);
  std::vector<int32_t> seq = {1000, 1280};
  const size_t n_scores = size_t(B) * max_pages * kPageSize;
  std::vector<float> want(n_scores);
  IndexerScoreParams p{.q = q.data(), .head_weights = w.data(), .head_weight_scale = 1.f / std::sqrt(float(Hi)),
                       .key_cache = cache.data(), .layout = il, .block_table = bt.data(), .max_pages = max_pages,
                       .seq_lens = seq.data(), .scores = want.data(), .B = B, .Hi = Hi,
                       .softmax_scale = 1.f / std::sqrt(float(D))};
  indexer_score_cpu(p);
  Buffer dq = to_device(q, "check q"), dw = to_device(w, "check w"), dc = to_device(cache, "check cache"),
         db = to_device(bt, "check block table"), ds = to_device(seq, "check seq"),
         dout(Where::Device, n_scores * 4, "check scores");
  p.q = dq.as<float>();
  p.head_weights = dw.as<float>();
  p.key_cache = dc.as<uint8_t>();
  p.block_table = db.as<int32_t>();
  p.seq_lens = ds.as<int32_t>();
  p.scores = dout.as<float>();
  indexer_score_cuda(p, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> got = to_host<float>(dout, n_scores);
  double max_abs = 0, max_ref = 0;
  for (size_t i = 0; i < n_scores; ++i) {
    if (std::isinf(want[i])) {
      require(got[i] == want[i], "bench indexer_score: position " + std::to_string(i) +
                                     " should be -inf (past seq_len); not timed");
      continue;
    }
    max_abs = std::max(max_abs, double(std::fabs(got[i] - want[i])));
    max_ref = std::max(max_ref, double(std::fabs(want[i])));
  }
  const double rel = max_abs / std::max(1.0, max_ref);
  require(rel <= 1e-5, "bench indexer_score: max abs error " + sci(max_abs) + " (max |score| " + sci(max_ref) +
                           ") vs the CPU twin, expected <= 1e-5 relative (seed " + std::to_string(seed) +
                           "); not timed");

  // topk: long random rows, a heavy-tie row (7 values), an all-equal row (the shared-memory overflow
  // path), a short row (seq_len <= k); rows of 131,072 and 32,768 positions.
  std::string flat_checked;  // contexts where the flat top-k form fits and was checked
  for (const int tk_pages : {2048, 512}) {
    const int stride = tk_pages * kPageSize;
    std::vector<int32_t> tseq = {stride, stride / 2 + 4465, stride / 3 + 6309, 2049, 1000};
    const int TB = int(tseq.size());
    std::vector<int32_t> tbt = shuffled_pages(TB, tk_pages, seed);
    std::vector<float> s(size_t(TB) * stride);
    for (size_t i = 0; i < s.size(); ++i) s[i] = rng_normal(seed, 31, i);
    for (int i = 0; i < stride; ++i) {
      s[size_t(1) * stride + i] = std::floor(rng_uniform(seed, 32, i) * 7.f) - 3.f;
      s[size_t(2) * stride + i] = i % 3 == 0 ? -0.f : 0.f;
    }
    std::vector<int32_t> twant(size_t(TB) * kTopk);
    topk_cpu({s.data(), stride, tseq.data(), tbt.data(), tk_pages, twant.data(), TB, kTopk});
    Buffer dsc = to_device(s, "check topk scores"), dsq = to_device(tseq, "check topk seq"),
           dbt = to_device(tbt, "check topk block table"), dsl(Where::Device, twant.size() * 4, "check topk slots");
    TopkParams tp{dsc.as<float>(), stride, dsq.as<int32_t>(), dbt.as<int32_t>(), tk_pages, dsl.as<int32_t>(), TB, kTopk};
    auto expect_twin = [&](const char* form) {
      CUDA_CHECK(cudaMemsetAsync(dsl.data(), 0x7f, dsl.bytes(), stream));
      topk_cuda(tp, stream);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<int32_t> tgot = to_host<int32_t>(dsl, twant.size());
      for (size_t i = 0; i < twant.size(); ++i)
        require(tgot[i] == twant[i], std::string("bench topk (") + form + "): context " + std::to_string(stride) +
                                         " request " + std::to_string(i / kTopk) + " rank " + std::to_string(i % kTopk) +
                                         " slot " + std::to_string(tgot[i]) + ", CPU twin " + std::to_string(twant[i]) +
                                         " (seed " + std::to_string(seed) + "); not timed");
    };
    expect_twin("cluster");
    if (!topk_flat_fits_here(TB, stride)) continue;  // (topk_cuda would run the cluster form again)
    // The flat form (TopkParams::flat_workspace), given the first-digit histogram as the score kernel leaves it.
    Buffer dth = to_device(topk_hist_spread_cpu(s.data(), TB, stride, tseq.data()), "check topk histogram"),
           dws(Where::Device, topk_flat_workspace_bytes(TB, stride), "check topk flat workspace");
    CUDA_CHECK(cudaMemset(dws.data(), 0, dws.bytes()));
    tp.top_hist = dth.as<unsigned>();
    tp.flat_workspace = dws.data();
    tp.flat_workspace_bytes = dws.bytes();
    expect_twin("flat");
    flat_checked += (flat_checked.empty() ? "" : ", ") + std::to_string(stride);
  }
  return "indexer_score max rel err " + sci(rel) + "; topk identical to CPU twin (ctx 32768 and 131072, ties; flat form at " +
         (flat_checked.empty() ? std::string("none") : flat_checked) + ")";
}

}  // namespace

namespace {

// --- the TMA-fed FP8 GEMV (linear_fp8_tma.h) at m = 1, beside linear_fp8 above: box rows 256 / 128 / 64
// (128 / 256 / 512 contiguous bytes of each weight row per stage) x ring depth 2 / 3 / 4, default splits. Each variant is first
// checked against the caller's linear_cpu rows (the first 64; rel 1e-3, as linear_fp8), then timed.
// `ref`: linear_cpu's y for the first 64 rows of `p` (the caller's check of linear_fp8).
void bench_linear_fp8_tma(const LinearParams& p, const std::vector<float>& ref, cudaStream_t stream, Timer& timer,
                          const Ceilings& c, std::vector<KernelBenchRecord>& out) {
  size_t part_elems = 1;
  for (int rows : {256, 128, 64})
    for (int stages : {2, 3, 4}) part_elems = std::max(part_elems, linear_fp8_tma_partial(p, 0, rows, stages));
  Buffer part(Where::Device, part_elems * 4, "tma partial");
  Buffer counters(Where::Device, linear_fp8_tma_counters(p) * 4, "tma counters");
  CUDA_CHECK(cudaMemset(counters.data(), 0, counters.bytes()));
  const size_t nk = size_t(p.n) * p.k, nb = size_t((p.n + 127) / 128) * ((p.k + 127) / 128);
  const double bytes = double(nk) + double(nb) * 4 + double(p.k) * 4 + double(p.n) * 4;
  for (int rows : {256, 128, 64})
    for (int stages : {2, 3, 4}) {
      const int S = linear_fp8_tma_splits(p, rows, stages);
      auto run = [&] { linear_fp8_tma_cuda(p, part.as<float>(), part.bytes() / 4, counters.as<int>(),
                                           counters.bytes() / 4, stream, S, stages, rows); };
      CUDA_CHECK(cudaMemsetAsync(p.y, 0xff, size_t(p.n) * 4, stream));
      run();
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<float> got(64);
      CUDA_CHECK(cudaMemcpy(got.data(), p.y, 64 * 4, cudaMemcpyDeviceToHost));
      double err = 0;
      for (int r = 0; r < 64; ++r)
        err = std::max(err, std::fabs(double(got[r]) - ref[r]) / (1e-3 + std::fabs(double(ref[r]))));
      require(err < 1e-3, "bench kernels: linear_fp8_tma disagrees with linear_cpu (max rel err " + sci(err) + ")");
      KernelBenchRecord r = make_record("linear_fp8_tma_r" + std::to_string(rows) + "_s" + std::to_string(stages) +
                                            "_k" + std::to_string(S),
                                        timer.time(run), bytes, 2.0 * double(nk), c);
      r.batch = 1;
      r.n = p.n;
      r.k = p.k;
      r.check = "vs linear_cpu, 64 rows: max rel err " + sci(err) + "; split-K " + std::to_string(S);
      progress(r);
      out.push_back(r);
    }
}

// The FP8 benches' check: the kernel's y (dy, on `stream`) against `twin` run on the host copy of p (x, codes, scales
// dense [n, k] and [n/128, k/128]) over W's first 64 rows: max |y - twin| / sum |x w| (an element-wise relative error
// is ill-conditioned where the sum cancels: S23d's bench stopped on 1.08e-3 of |ref| + 1e-3 for the GEMV). twin_out:
// the twin's [m, 64] results.
double fp8_twin_rel_err(const LinearParams& p, const Buffer& dy, cudaStream_t stream, void (*twin)(const LinearParams&),
                        const std::vector<float>& x, const std::vector<uint8_t>& codes, const std::vector<float>& scales,
                        std::vector<float>* twin_out = nullptr) {
  const int m = p.m, n = p.n, k = p.k;
  CUDA_CHECK(cudaStreamSynchronize(stream));  // to_host copies on the legacy stream, which does not wait for ours
  std::vector<float> got = to_host<float>(dy, size_t(m) * n);
  LinearParams h = p;
  std::vector<float> ref(size_t(m) * 64);
  h.x = x.data();
  h.w = codes.data();
  h.w_scale = scales.data();
  h.y = ref.data();
  h.n = 64;
  h.ld_scale = (k + 127) / 128;
  twin(h);
  double err = 0;
  for (int i = 0; i < m; ++i)
    for (int r = 0; r < 64; ++r) {
      double mag = 0;
      for (int col = 0; col < k; ++col)
        mag += std::fabs(double(x[size_t(i) * k + col]) * e4m3_bits_to_float(codes[size_t(r) * k + col]) *
                         scales[size_t(r / 128) * h.ld_scale + col / 128]);
      err = std::max(err, std::fabs(double(got[size_t(i) * n + r]) - ref[size_t(i) * 64 + r]) / mag);
    }
  if (twin_out) *twin_out = std::move(ref);  // [m, 64]
  return err;
}

// --- FP8 projections on the tensor cores (linear_fp8_mma, kernels/linear_fp8.h) against the GEMV
// (linear_fp8), the dequantize + cuBLASLt path (linear_fp8_dequant, m > 16) and cuBLASLt BF16, for
// m = 1 .. 64 at o_proj 6144x16384, one expert's gate+up 4096x6144 and down 6144x2048, kv_a 576x6144.
// Bytes: W once (n k) + scales (n k / 16384 * 4) + x (m k 4) + y (m n 4); FLOPs 2 m n k. Before timing,
// the kernel is checked against its twin linear_fp8_mma_cpu on 64 rows (rel 1e-5 of sum |x w|). Each
// m also times the other m-tile width (linear_fp8_mma_mt2 / _mt4) where it differs from the default, and
// (m <= 16) mt 2 with the register prefetch of the next block's W (linear_fp8_mma_mt2_pf).
void bench_linear_mma(const KernelBenchOptions& opt, cudaStream_t stream, Timer& timer, const Ceilings& c,
                      uint64_t seed, std::vector<KernelBenchRecord>& out) {
  std::fprintf(stderr, "bench kernels: linear_fp8_mma (vs linear_fp8 GEMV, dequant + cuBLASLt, linear_bf16)\n");
  LinearContext ctx;
  std::vector<std::pair<int, int>> shapes = {{6144, 16384}, {4096, 6144}};
  if (!opt.quick) {
    shapes.push_back({6144, 2048});
    shapes.push_back({576, 6144});
  }
  for (auto [n, k] : shapes) {
    const size_t nk = size_t(n) * k, nb = size_t((n + 127) / 128) * ((k + 127) / 128);
    std::vector<uint8_t> codes(nk);
    std::vector<float> scales(nb);
    for (size_t i = 0; i < nk; i += 8) {
      const uint64_t h = splitmix64(seed ^ (i * 0x9e37u) ^ 0x5bd1e995u);
      for (size_t q = 0; q < 8 && i + q < nk; ++q) codes[i + q] = uint8_t((h >> (8 * q)) & 0xf7u);  // finite, both signs
    }
    for (size_t i = 0; i < nb; ++i) scales[i] = (0.5f + rng_uniform(seed, 41, i)) / 448.f;
    Buffer dw = to_device(codes, "bench fp8 weight"), ds = to_device(scales, "bench fp8 scales");
    Buffer wb(Where::Device, nk * 2, "bench bf16 weight");
    fill_bf16_device(wb.data(), nk, seed, 42);
    const std::vector<int> ms =
        opt.quick ? std::vector<int>{1, 8, 32, 64, 128} : std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128};
    for (int m : ms) {
      std::vector<float> x(size_t(m) * k);
      for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 43, i);
      Buffer dx = to_device(x, "bench x"), dy(Where::Device, size_t(m) * n * 4, "bench y");
      LinearParams p{dx.as<float>(), dw.data(), DType::F8_E4M3, dy.as<float>(), m, n, k, false, false};
      p.w_scale = ds.as<float>();
      const double bytes = double(nk) + double(nb) * 4 + double(m) * k * 4 + double(m) * n * 4;
      const double flops = 2.0 * m * double(nk);
      auto record = [&](const std::string& name, const std::function<void()>& launch, double rec_bytes,
                        const std::string& check) {
        std::vector<double> us = timer.time(launch);
        KernelBenchRecord r = make_record(name, us, rec_bytes, flops, c);
        r.batch = m;
        r.n = n;
        r.k = k;
        r.check = check;
        progress(r);
        out.push_back(r);
      };
      auto twin_err = [&](void (*twin)(const LinearParams&)) { return fp8_twin_rel_err(p, dy, stream, twin, x, codes, scales); };
      if (m >= 2) {
        const int mt_default = m <= 32 ? 4 : 2;  // linear_fp8_mma_cuda's default (mt = 0)
        for (int variant = 0; variant < 3; ++variant) {  // default mt, the other mt, mt 2 + register prefetch
          const int mt = variant == 0 ? 0 : variant == 1 ? (mt_default == 4 ? 2 : 4) : 2;
          const bool pf = variant == 2;
          if (mt == 4 && m > 32) continue;  // taken as 2 there (register spills)
          if (pf && m > 16) continue;       // prefetch exists for m <= 16
          const size_t elems = size_t(linear_fp8_mma_splits(p, mt, pf)) * m * n;
          Buffer part(Where::Device, elems * 4, "bench mma partial sums");
          linear_fp8_mma_cuda(p, part.as<float>(), elems, stream, mt, pf);
          const double err = twin_err(linear_fp8_mma_cpu);
          require(err < 1e-5, "bench kernels: linear_fp8_mma (mt " + std::to_string(mt) +
                                  ") disagrees with linear_fp8_mma_cpu (max rel err " + sci(err) + " of sum |x w|)");
          const int S = linear_fp8_mma_splits(p, mt, pf);
          const std::string name = mt == 0 ? "linear_fp8_mma" : "linear_fp8_mma_mt" + std::to_string(mt) + (pf ? "_pf" : "");
          record(name, [&] { linear_fp8_mma_cuda(p, part.as<float>(), elems, stream, mt, pf); },
                 bytes + (S > 1 ? 2.0 * S * m * n * 4 : 0.0),
                 "vs linear_fp8_mma_cpu, 64 rows: max rel err " + sci(err) + " of sum |x w|; split-K " + std::to_string(S));
        }
      }
      if (linear_fp8_wgmma_supported(p)) {  // the block-scaled FP8 tensor-core GEMM (m > 16 in the engine)
        LinearContext wg;
        wg.fp8_mma_max_m = 0;
        wg.fp8_gemv_max_m = 0;
        wg.fp8_large_m = LinearContext::Fp8LargeM::Wgmma;
        int dev = 0, sms = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        // The default cut, split-K (linear_fp8_wgmma_splitk: session 23's cut), and (m > 64) tiles of 64 tokens
        // (linear_fp8_wgmma_n64, fp8_wgmma_max_n 64). Each checked against the twin before it is timed. (S24c also
        // timed W laid out block-contiguous, each TMA box one 16 KB read: no faster, o_proj m 8 / 32 / 128 45.1 /
        // 47.6 / 81.8 us against 44.4 / 48.3 / 81.8; not kept.)
        for (int variant = 0; variant < 3; ++variant) {
          if (variant == 2 && m <= 64) continue;
          wg.fp8_wgmma_stream_k = variant != 1;
          wg.fp8_wgmma_max_n = variant == 2 ? 64 : 128;
          const Fp8WgmmaPlan plan = linear_fp8_wgmma_plan(p, sms, wg.fp8_wgmma_max_n, wg.fp8_wgmma_stream_k);
          const std::string name = variant == 0   ? "linear_fp8_wgmma"
                                   : variant == 1 ? "linear_fp8_wgmma_splitk"
                                                  : "linear_fp8_wgmma_n64";
          linear_cuda(p, wg, stream);
          const double e = twin_err(linear_fp8_wgmma_cpu);
          require(e < 5e-4, "bench kernels: " + name + " disagrees with linear_fp8_wgmma_cpu (max rel err " + sci(e) +
                                " of sum |x w|)");
          // Bytes: as above plus x's codes written and read once per row block (L2) and the partials (written and
          // read: plan.partial_moved floats each way).
          record(name, [&] { linear_cuda(p, wg, stream); }, bytes + double(m) * k + 2.0 * plan.partial_moved * 4,
                 "vs linear_fp8_wgmma_cpu, 64 rows: max rel err " + sci(e) + " of sum |x w|; N " +
                     std::to_string(plan.N) + (plan.stream_k ? ", stream-K over " : ", split-K ") +
                     (plan.stream_k ? std::to_string(plan.grid) + " CTAs" : std::to_string(plan.S)) + ", " +
                     std::to_string(plan.segments) + " segments per tile at most");
        }
      }
      LinearContext old;  // the pre-mma FP8 paths: GEMV for m <= 16, dequantize + cuBLASLt beyond
      old.fp8_mma_max_m = 0;
      record(m <= old.fp8_gemv_max_m ? "linear_fp8" : "linear_fp8_dequant", [&] { linear_cuda(p, old, stream); },
             m <= old.fp8_gemv_max_m ? bytes : bytes + double(nk) * 4, "checked in gpu_linear_fp8");
      LinearParams q = p;
      q.w = wb.data();
      q.w_dtype = DType::BF16;
      q.w_scale = nullptr;
      record("linear_bf16", [&] { linear_cuda(q, ctx, stream); },
             double(nk) * 2 + double(m) * k * 4 + double(m) * n * 4, "cuBLASLt (checked in gpu_linear)");
    }
  }
}

}  // namespace

namespace {

// --- MLA weight absorption at GLM-5's dims (nope 192, v 256, kv_lora 512, BF16 kv_b) ---
// Bytes = each head's weights once (what the fast path reads) + activations in + results out; FLOPs
// = 2 x B x H x K x N. The roofline's compute ceiling is the BF16 tensor-core GEMM, which these fp32
// FMA kernels cannot reach: the check string carries the fp32 FMA floor (SMs x 128 FMA/clk x clock).
// Records: mla_absorb / mla_unabsorb = the dispatch (what the engine runs: plan.gemv / plan.fast pick
// the GEMV, tiled or simple kernels), _tiled = the tiled kernels, _naive = the simple kernels, _gemv =
// the GEMV kernels (B <= 4), _tc = the tensor-core kernels (three BF16 MMAs per product: the recorded
// FLOPs count one). All are first checked against the CPU twins (B = 5 and 3, H = 64): error
// relative to sum |x||w| per output.
void bench_absorb(cudaStream_t stream, Timer& timer, const Ceilings& c, bool quick, uint64_t seed,
                  std::vector<KernelBenchRecord>& out) {
  std::fprintf(stderr, "bench kernels: mla_absorb, mla_unabsorb (fp32 FMA and split-BF16 tensor cores, BF16 kv_b)\n");
  constexpr int kNope = 192, kRope = 64, kV = 256, kL = 512, kQk = kNope + kRope;
  int sms = 0, clock_khz = 0, dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  const double fp32_flops = double(sms) * 128 * 2 * clock_khz * 1e3;
  const int Hmax = 64, Bmax = 128;
  const size_t w_elems = size_t(Hmax) * (kNope + kV) * kL;
  Buffer kv(Where::Device, w_elems * 2, "bench kv_b");
  fill_bf16_device(kv.data(), w_elems, seed, 41);
  std::vector<float> x(size_t(Bmax) * Hmax * kL);  // q [B, H, 256] or o_latent [B, H, 512]: the larger
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 42, i);
  Buffer dx = to_device(x, "bench absorb activations");
  Buffer dy(Where::Device, size_t(Bmax) * Hmax * kL * 4, "bench absorb results");

  // One call of variant 0 dispatch, 1 simple, 2 tiled, 3 GEMV (B <= 4), 4 tensor cores, 5 / 6 / 7 tensor cores
  // with 1 / 2 / 4 warps per 16-row batch tile.
  auto run_absorb = [&](int variant, const MlaAbsorbParams& pa) {
    if (variant == 0) mla_absorb_cuda(pa, stream);
    else if (variant == 1) mla_absorb_simple_cuda(pa, stream);
    else if (variant == 2) mla_absorb_tiled_cuda(pa, stream);
    else if (variant == 3) mla_absorb_gemv_cuda(pa, stream);
    else mla_absorb_tc_cuda(pa, stream, variant == 4 ? 0 : 1 << (variant - 5));
  };
  auto run_unabsorb = [&](int variant, const MlaUnabsorbParams& pu) {
    if (variant == 0) mla_unabsorb_cuda(pu, stream);
    else if (variant == 1) mla_unabsorb_simple_cuda(pu, stream);
    else if (variant == 2) mla_unabsorb_tiled_cuda(pu, stream);
    else if (variant == 3) mla_unabsorb_gemv_cuda(pu, stream);
    else mla_unabsorb_tc_cuda(pu, stream, variant == 4 ? 0 : 1 << (variant - 5));
  };
  // Correctness first: every path vs the CPU twin (B 5: dispatch, simple, tiled; B 3: the GEMV kernels).
  double max_err = 0;
  for (const int B : {5, 3}) {
    const int H = Hmax;
    std::vector<uint16_t> w = to_host<uint16_t>(kv, w_elems), w_abs(w);
    for (auto& e : w_abs) e &= 0x7fffu;
    std::vector<float> xa(size_t(B) * H * kL), xa_abs(xa.size());
    for (size_t i = 0; i < xa.size(); ++i) xa_abs[i] = std::fabs(xa[i] = x[i]);
    const size_t na = size_t(B) * H * kL, nu = size_t(B) * H * kV;
    std::vector<float> ra(na), sa(na), ru(nu), su(nu);
    mla_absorb_cpu({xa.data(), w.data(), DType::BF16, ra.data(), B, H, kNope, kV, kL, kQk});
    mla_absorb_cpu({xa_abs.data(), w_abs.data(), DType::BF16, sa.data(), B, H, kNope, kV, kL, kQk});
    mla_unabsorb_cpu({xa.data(), w.data(), DType::BF16, ru.data(), B, H, kNope, kV, kL});
    mla_unabsorb_cpu({xa_abs.data(), w_abs.data(), DType::BF16, su.data(), B, H, kNope, kV, kL});
    for (const int variant : B == 5 ? std::vector<int>{0, 1, 2, 4, 5, 6, 7} : std::vector<int>{3, 4}) {
      const MlaAbsorbParams pa{dx.as<float>(), kv.data(), DType::BF16, dy.as<float>(), B, H, kNope, kV, kL, kQk};
      CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, na * 4, stream));  // NaN: unwritten values fail the check
      run_absorb(variant, pa);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<float> ga = to_host<float>(dy, na);
      double err = 0;
      for (size_t i = 0; i < na; ++i) err = std::max(err, std::isfinite(ga[i]) ? std::fabs(double(ga[i]) - ra[i]) / sa[i] : 1.0);
      const MlaUnabsorbParams pu{dx.as<float>(), kv.data(), DType::BF16, dy.as<float>(), B, H, kNope, kV, kL};
      CUDA_CHECK(cudaMemsetAsync(dy.data(), 0xff, nu * 4, stream));
      run_unabsorb(variant, pu);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      std::vector<float> gu = to_host<float>(dy, nu);
      for (size_t i = 0; i < nu; ++i) err = std::max(err, std::isfinite(gu[i]) ? std::fabs(double(gu[i]) - ru[i]) / su[i] : 1.0);
      require(err < 1e-5, "bench kernels: mla_absorb / mla_unabsorb variant " + std::to_string(variant) +
                              " disagrees with the CPU twin at B " + std::to_string(B) + " (max err " + sci(err) +
                              " of sum |x||w|, expected < 1e-5)");
      max_err = std::max(max_err, err);
    }
  }
  const std::string check = "vs CPU twin B=5 and 3, H=64: max err " + sci(max_err) + " of sum |x||w|";

  for (int H : {64, 16}) {
    for (int B : quick ? std::vector<int>{1, 32} : std::vector<int>{1, 4, 8, 32, 128}) {
      const MlaAbsorbParams pa{dx.as<float>(), kv.data(), DType::BF16, dy.as<float>(), B, H, kNope, kV, kL, kQk};
      const MlaUnabsorbParams pu{dx.as<float>(), kv.data(), DType::BF16, dy.as<float>(), B, H, kNope, kV, kL};
      for (int which = 0; which < 16; ++which) {
        const bool absorb = which < 8;
        const int variant = which % 8;  // 0 dispatch, 1 simple, 2 tiled, 3 GEMV, 4 tensor cores, 5-7 their warp splits
        const MlaAbsorbPlan plan = absorb ? plan_mla_absorb(pa) : plan_mla_unabsorb(pu);
        if (variant == 3 && !plan.gemv_eligible) continue;
        if (variant >= 4 && !plan.tc_eligible) continue;
        if (variant >= 5 && (quick || B < 8)) continue;
        std::vector<double> us = timer.time([&] {
          if (absorb) run_absorb(variant, pa);
          else run_unabsorb(variant, pu);
        });
        const double K = absorb ? kNope : kL, N = absorb ? kL : kV;
        const double bytes = double(H) * K * N * 2 + double(B) * H * (K + N) * 4, flops = 2.0 * B * H * K * N;
        const std::string name = std::string(absorb ? "mla_absorb" : "mla_unabsorb") +
                                 (variant == 1 ? "_naive" : variant == 2 ? "_tiled" : variant == 3 ? "_gemv" : variant == 4 ? "_tc" :
                                 variant >= 5 ? "_tc_ng" + std::to_string(1 << (variant - 5)) : "");
        KernelBenchRecord r = make_record(name, us, bytes, flops, c);
        r.batch = B;
        r.heads = H;
        r.n = int64_t(N);
        r.k = int64_t(K);
        r.check = check + "; fp32 FMA floor " + sci(flops / fp32_flops * 1e6) + " us";
        if (variant == 0)
          r.check += plan.gemv ? "; dispatch: gemv" : plan.tc ? "; dispatch: tc" : plan.fast ? "; dispatch: tiled" : "; dispatch: simple";
        if (variant == 2)
          r.check += "; " + std::to_string(plan.ctas) + " CTAs, " + std::to_string(4 * plan.batch_groups) +
                     " rows x " + std::to_string(plan.passes) + " passes, " + std::to_string(plan.smem_bytes / 1024) +
                     " KB smem";
        progress(r);
        out.push_back(r);
      }
    }
  }
}

// One weight dtype of bench_moe_grouped.
// pair_only: FP8 at batch 1 only (the per-token kernels' register caps; family "moe-pair").
void bench_moe_grouped_dtype(const KernelBenchOptions& opt, cudaStream_t stream, Timer& timer, const Ceilings& c,
                             uint64_t seed, DType dt, bool pair_only, std::vector<KernelBenchRecord>& out) {
  const bool fp8 = dt == DType::F8_E4M3;
  const std::string tag = fp8 ? "fp8" : "bf16";
  const int E = 256, k = 8, hidden = 6144, inter = 2048;
  const size_t per = size_t(inter) * hidden;  // elements of one expert's gate (= up = down)
  const size_t es = fp8 ? 1 : 2, n = size_t(E) * per * es;
  auto fill_weights = [&](Buffer& b, uint64_t stream_id) {
    const size_t pattern = size_t(1) << 20;
    std::vector<uint8_t> h(pattern);
    if (fp8) {
      for (size_t i = 0; i < pattern; ++i) {
        uint8_t v = float_to_e4m3_bits(rng_normal(seed, stream_id, i) * 64.f);
        if ((v & 0x7f) == 0x7f) v = 0x3f;
        h[i] = v;
      }
    } else {
      for (size_t i = 0; i < pattern / 2; ++i) {  // little-endian bf16 bits
        const uint16_t v = float_to_bf16_bits(rng_normal(seed, stream_id, i) / std::sqrt(float(hidden)));
        std::memcpy(&h[2 * i], &v, 2);
      }
    }
    CUDA_CHECK(cudaMemcpy(b.data(), h.data(), std::min(pattern, b.bytes()), cudaMemcpyHostToDevice));
    for (size_t off = pattern; off < b.bytes(); off *= 2)
      CUDA_CHECK(cudaMemcpy(b.as<uint8_t>() + off, b.data(), std::min(off, b.bytes() - off), cudaMemcpyDeviceToDevice));
  };
  Buffer wg(Where::Device, n, "bench moe gate"), wu(Where::Device, n, "bench moe up"), wd(Where::Device, n, "bench moe down");
  fill_weights(wg, 51);
  fill_weights(wu, 52);
  fill_weights(wd, 53);
  const size_t ns = size_t(E) * (inter / 128) * (hidden / 128);
  std::vector<float> hs(ns);
  for (size_t i = 0; i < ns; ++i) hs[i] = (0.5f + rng_uniform(seed, 54, i)) / 64.f / std::sqrt(float(hidden));
  Buffer sg = to_device(hs, "bench moe gate scales"), su = to_device(hs, "bench moe up scales"),
         sd = to_device(hs, "bench moe down scales");
  // FP8 at batch 1: the per-token kernels (moe_gate_up_fp8_kernel, moe_down_pair_fp8_kernel), measured in each
  // form: "_pair" (the default), "_pair_wait" (down_early_loads 0), "_pair_fused" (pair_sync: one persistent launch);
  // all bitwise equal.
  std::vector<int> batches = opt.quick ? std::vector<int>{32} : std::vector<int>{8, 32, 128};
  if (fp8) batches.insert(batches.begin(), 1);
  if (pair_only) batches = {1};
  for (int B : batches) {
    std::vector<float> x(size_t(B) * hidden), tw(size_t(B) * k);
    std::vector<int32_t> ids(size_t(B) * k);
    std::vector<char> used(E, 0);
    for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 55, i);
    for (int b = 0; b < B; ++b) {
      std::vector<int32_t> all(E);
      for (int e = 0; e < E; ++e) all[size_t(e)] = e;
      for (int j = 0; j < k; ++j) {  // partial Fisher-Yates: k distinct experts
        const int r = j + int(splitmix64(seed ^ (uint64_t(b) * 977 + j)) % uint64_t(E - j));
        std::swap(all[size_t(j)], all[size_t(r)]);
        ids[size_t(b) * k + j] = all[size_t(j)];
        used[size_t(all[size_t(j)])] = 1;
        tw[size_t(b) * k + j] = 0.1f + rng_uniform(seed, 56, size_t(b) * k + j);
      }
    }
    int distinct = 0;
    for (char u : used) distinct += u;
    Buffer dx = to_device(x, "bench moe x"), dids = to_device(ids, "bench moe ids"), dtw = to_device(tw, "bench moe tw");
    Buffer act(Where::Device, size_t(B) * k * inter * 4, "bench moe act"), dout(Where::Device, size_t(B) * hidden * 4, "bench moe out");
    Buffer group(Where::Device, (size_t(E) + 1 + size_t(B) * k) * 4, "bench moe group"),
        pair(Where::Device, size_t(B) * k * hidden * 4, "bench moe pair_out");
    const std::vector<int32_t> sync0(moe_pair_sync_ints(B, k), 0);
    Buffer sync = to_device(sync0, "bench moe pair_sync");
    MoeExpertsParams p{};
    p.x = dx.as<float>();
    p.topk_ids = dids.as<int32_t>();
    p.topk_weights = dtw.as<float>();
    p.w_gate = wg.data();
    p.w_up = wu.data();
    p.w_down = wd.data();
    p.w_dtype = dt;
    p.s_gate = fp8 ? sg.as<float>() : nullptr;
    p.s_up = fp8 ? su.as<float>() : nullptr;
    p.s_down = fp8 ? sd.as<float>() : nullptr;
    p.act = act.as<float>();
    p.out = dout.as<float>();
    p.B = B;
    p.E = E;
    p.k = k;
    p.hidden = hidden;
    p.inter = inter;
    p.group = group.as<int32_t>();
    p.pair_out = pair.as<float>();
    // Tensor cores with the weight prefetch off (_mma) and on (_mma_pf) (MoeExpertsParams.mma_prefetch; the
    // default is on for BF16, off for FP8), and the fp32 kernels (_grouped, the reference). (S9f also timed caps
    // of 2 and 3 CTAs per SM, by padding the dynamic shared memory: 12-35% slower for BF16, the FP8 kernels
    // already run at 2 per SM; not kept.)
    // Per-token path (B < 4): the register caps, all bitwise the same (checked against the first).
    // Also the TMA-fed tensor-core kernels (_wgmma: MoeExpertsParams::fp8_wgmma with its scratch; FP8 and BF16),
    // checked against the fp32 kernels (gpu_moe_grouped bounds each output).
    struct Variant { const char* suffix; bool mma; int pf; int early = 1; bool fused = false; bool wgmma = false; int ks = 0; };
    const bool pair_path = B < kMoeGroupMinTokens;
    std::vector<Variant> variants =
        pair_path ? std::vector<Variant>{{"_pair", true, 0}, {"_pair_wait", true, 0, 0}, {"_pair_fused", true, 0, 1, true}}
                  : std::vector<Variant>{{"_mma", true, 0}, {"_mma_pf", true, 1}, {"_grouped", false, 0}};
    const MoeFp8WgmmaPlan wq = moe_fp8_wgmma_plan(B, k, E, E, hidden, inter, 2, dt);  // the larger scratch
    Buffer wscratch(Where::Device, wq.scratch_bytes, "bench moe wgmma scratch");
    moe_fp8_wgmma_scratch_init(wscratch.as<uint8_t>(), wscratch.bytes());
    p.wgmma_scratch_bytes = wscratch.bytes();
    // At batch 1-3 also the grouped wgmma path (MoeExpertsParams::group_min_tokens 1): is it faster than the
    // per-token pair path the engine runs there?
    const bool wgmma = (fp8 || !pair_path) && [&] {
      p.wgmma_scratch = wscratch.as<uint8_t>();
      return moe_fp8_wgmma_unsupported(p).empty();
    }();
    if (wgmma)  // the plan's choice (gate_up's k unsplit), then the split forced: the A/B behind that choice
      for (auto [suffix, ks] : {std::pair{"_wgmma", 0}, {"_wgmma_k2", 2}})
        if (fp8 || ks == 0) variants.push_back({suffix, true, 0, 1, false, true, ks});  // (BF16: never split)
    auto use = [&](const Variant& v) {
      p.group_min_tokens = v.wgmma ? 1 : kMoeGroupMinTokens;
      p.fp8_wgmma = v.wgmma;
      p.wgmma_ksplit = v.ks;
      p.wgmma_scratch = v.wgmma ? wscratch.as<uint8_t>() : nullptr;
      p.fp8_mma = v.mma;
      p.mma_prefetch = v.pf;
      p.down_early_loads = v.early;  // the down kernel's first weight loads before its PDL wait
      p.pair_sync = v.fused ? sync.as<int32_t>() : nullptr;  // one persistent launch
    };
    // Every tensor-core variant's output against the fp32 kernels' before anything is timed.
    std::vector<std::vector<float>> got(variants.size());
    for (size_t i = 0; i < variants.size(); ++i) {
      use(variants[i]);
      moe_experts_cuda(p, stream);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      got[i] = to_host<float>(dout, size_t(B) * hidden);
    }
    const std::vector<float>& ref = pair_path ? got[0] : got[2];
    double mx = 0, err = 0;
    for (size_t i = 0; i < ref.size(); ++i) mx = std::max(mx, std::fabs(double(ref[i])));
    for (size_t v = pair_path ? 1 : 0; v < (pair_path ? variants.size() : 2); ++v)
      if (!variants[v].wgmma)
        for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, std::fabs(double(got[v][i]) - ref[i]));
    require(std::isfinite(err) && err <= (pair_path ? 0.0 : 1e-2 * mx),
            "bench kernels: moe " + tag + (pair_path ? " per-token variants not bitwise equal" : " mma vs fp32 grouped") +
                ": max err " + sci(err) + " of max |out| " + sci(mx));
    double err_wgmma = 0;
    if (wgmma) {
      for (size_t v = 0; v < variants.size(); ++v)
        if (variants[v].wgmma)
          for (size_t i = 0; i < ref.size(); ++i) err_wgmma = std::max(err_wgmma, std::fabs(double(got[v][i]) - ref[i]));
      // FP8 1e-1 of max |out|: x and act rounded to e4m3 (2^-4 relative per element) leave 3.3-5.0% of max |out| on
      // the bench's fresh random data (S25-S26 runs at batch 1-128; 5e-2 failed once, S26b, at 5.03%). BF16 1e-2
      // (bf16 x and act: 2^-8). The per-output bounds against exact arithmetic are GpuMoeGrouped's wgmma tests'.
      const double tol = fp8 ? 1e-1 : 1e-2;
      require(std::isfinite(err_wgmma) && err_wgmma <= tol * mx, "bench kernels: moe " + tag +
                                                                     " wgmma vs fp32 grouped: max err " + sci(err_wgmma) +
                                                                     " of max |out| " + sci(mx));
    }
    const double bytes = double(distinct) * (3.0 * per * es + (fp8 ? 3.0 * (inter / 128) * (hidden / 128) * 4 : 0.0)) +
                         double(B) * hidden * 4 * 2 + double(B) * k * (inter * 4 * 2 + hidden * 4 * 2);
    for (const Variant& v : variants) {
      use(v);
      std::vector<double> us = timer.time([&] { moe_experts_cuda(p, stream); });
      KernelBenchRecord r = make_record("moe_experts_" + tag + v.suffix, us, bytes,
                                        2.0 * B * k * 3.0 * double(per), c);
      r.batch = B;
      r.topk = k;
      r.n = distinct;  // distinct experts read
      r.k = hidden;
      r.check = (v.wgmma       ? (pair_path ? "wgmma vs per-token: max err " : "wgmma vs fp32 grouped: max err ")
                 : pair_path ? "per-token variants bitwise equal (max err "
                             : "mma vs fp32 grouped: max err ") +
                sci((v.wgmma ? err_wgmma : err) / mx) + (pair_path && !v.wgmma ? "); " : " of max |out|; ") +
                std::to_string(distinct) + " distinct experts";
      progress(r);
      out.push_back(r);
    }
  }
}

// --- MoE experts, grouped by expert (batch >= 4), GLM-5 size (256 experts, top-8, hidden 6144, inter
// 2048), FP8 experts with 128x128 block scales and BF16 experts (FP8 also at batch 1: the per-token kernels
// in each form, moe_experts_fp8_pair[_wait|_fused], checked bitwise equal): the tensor-core kernels
// (moe_experts_{fp8,bf16}_mma, the default) vs the fp32 grouped kernels (moe_experts_{fp8,bf16}_grouped,
// MoeExpertsParams.fp8_mma = false). Uniform random routing (8 distinct experts per token). Bytes = the
// distinct experts' weights and scales (each read once) + x, act (written + read), pair_out (written +
// read), out; FLOPs 2 B k 3 inter hidden. Weights: a 1 MiB pattern repeated (FP8: finite e4m3 codes,
// 9.7 GB; BF16: N(0, 1/hidden) values, 19.3 GB, allocated after the FP8 ones are freed). Checked: mma vs
// fp32 grouped within 1e-2 of max |out| (the per-output bounds are tested in gpu_moe_grouped).
void bench_moe_grouped(const KernelBenchOptions& opt, cudaStream_t stream, Timer& timer, const Ceilings& c,
                       uint64_t seed, bool pair_only, std::vector<KernelBenchRecord>& out) {
  std::fprintf(stderr, "bench kernels: moe_experts_{fp8,bf16}_mma, moe_experts_{fp8,bf16}_grouped\n");
  for (DType dt : {DType::F8_E4M3, DType::BF16})
    if (!pair_only || dt == DType::F8_E4M3) bench_moe_grouped_dtype(opt, stream, timer, c, seed, dt, pair_only, out);
}

}  // namespace

std::vector<KernelBenchRecord> run_kernel_bench(const KernelBenchOptions& opt) {
  require(cuda_available(), "bench kernels: no CUDA device (the benchmark times GPU kernels)");
  require(opt.reps >= 1, "bench kernels: --reps = " + std::to_string(opt.reps) + ", expected >= 1");
  require(opt.warmup >= 0, "bench kernels: --warmup = " + std::to_string(opt.warmup) + ", expected >= 0");
  for (const std::string& name : opt.only) {
    const auto& f = kernel_bench_families();
    if (std::find(f.begin(), f.end(), name) == f.end()) {
      std::string list;
      for (const auto& n : f) list += (list.empty() ? "" : ", ") + n;
      throw Error("bench kernels: --only " + name + ": unknown kernel family, expected one of " + list);
    }
  }
  const bool want_cast = kernel_bench_wants(opt, "cast"), want_mla = kernel_bench_wants(opt, "mla");
  require(opt.pool_tokens >= kKernelBenchMinPoolTokens, "bench kernels: --pool-tokens = " + std::to_string(opt.pool_tokens) +
                                                           ", expected >= " + std::to_string(kKernelBenchMinPoolTokens));
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{stream};
  std::vector<KernelBenchRecord> out;
  Timer timer(stream, opt.warmup, opt.reps);
  std::fprintf(stderr, "bench kernels: ceilings\n");
  const Ceilings c = measure_ceilings(stream, timer, out);
  for (const auto& r : out) progress(r);

  const std::vector<int> batches = opt.quick ? std::vector<int>{1, 64} : std::vector<int>{1, 8, 32, 64, 128};
  const LatentLayout l = make_latent_layout(512, 64, true);
  const LatentLayout lb = bf16_layout_of(l);
  const int64_t rows = opt.pool_tokens;
  const uint64_t seed = fresh_seed();

  // --- casts and MLA decode share one FP8 pool and its BF16 cast ---
  if (want_cast || want_mla) {
    std::fprintf(stderr, "bench kernels: kv_cast, kv_gather_cast, mla_decode (pool %lld tokens)\n", (long long)rows);
    if (want_cast) check_casts(stream);
    const std::string cast_check = "bit-identical to CPU twin (1000 rows, 777 gathers)";
    const std::string mla_check = want_mla ? check_mla(stream) : std::string();
    Buffer pool(Where::Device, size_t(rows) * l.row_bytes, "bench FP8 pool");
    Buffer bf16(Where::Device, size_t(rows) * lb.row_bytes, "bench BF16 pool");
    kv_fill_random_cuda({pool.as<uint8_t>(), l, nullptr, {}, 0, rows, seed}, stream);
    if (want_cast) {
      KvCastParams p{pool.as<uint8_t>(), l, bf16.as<uint16_t>(), rows};
      std::vector<double> us = timer.time([&] { kv_cast_cuda(p, stream); });
      KernelBenchRecord r = make_record("kv_cast", us, double(rows) * (l.row_bytes + lb.row_bytes), 0, c);
      r.pool_tokens = rows;
      r.check = cast_check;
      progress(r);
      out.push_back(r);
    }
    for (int B : want_cast ? batches : std::vector<int>{}) {
      const int64_t count = int64_t(B) * kTopk;
      std::vector<int32_t> idx = random_indices(B, kTopk, rows, seed + B);
      Buffer d_idx = to_device(idx, "bench indices"), d_cidx(Where::Device, count * 4, "bench compact indices"),
             compact(Where::Device, count * lb.row_bytes, "bench compact BF16 rows");
      KvGatherCastParams p{pool.as<uint8_t>(), l, d_idx.as<int32_t>(), compact.as<uint16_t>(), d_cidx.as<int32_t>(),
                           count};
      std::vector<double> us = timer.time([&] { kv_gather_cast_cuda(p, stream); });
      KernelBenchRecord r = make_record("kv_gather_cast", us, double(count) * (l.row_bytes + lb.row_bytes + 8), 0, c);
      r.batch = B;
      r.topk = kTopk;
      r.pool_tokens = rows;
      r.check = cast_check;
      progress(r);
      out.push_back(r);
    }
    for (bool fp8 : want_mla ? std::vector<bool>{true, false} : std::vector<bool>{}) {
      // 128 and 256 query heads per request (FP8, B 64 / 128 even with --quick): FlashMLA's sparse decode
      // shapes, 128 heads at s_q 1 and s_q 2 (s_q tokens of a request attend to the same rows, so 2 x 128
      // heads sharing one index row is the same work: tools/flashmla_bench.py times FlashMLA there).
      for (int H : {64, 16, 128, 256}) {
        for (int B : H > 64 ? std::vector<int>{64, 128} : batches) {
          if (H > 64 && !fp8) continue;
          std::vector<int32_t> idx = random_indices(B, kTopk, rows, seed + 7 * B + H);
          MlaInputs in = make_mla_inputs(B, H, kTopk, l, idx, seed + B);
          const LatentLayout kl = fp8 ? l : lb;
          MlaDecodeParams p = mla_params(in, fp8 ? pool.as<uint8_t>() : bf16.as<uint8_t>(), kl, B, H, kTopk);
          // The defaults, then (B <= 32, where the grid matters) fewer, longer split-K chunks and
          // 16-head slices per CTA (tuning sweeps: heads_per_cta, splits).
          const int s_auto = mla_decode_num_splits(B, H, kTopk);
          std::vector<std::pair<int, int>> sweep{{0, 0}};  // the default (heads per CTA, splits)
          if (B <= 32) {
            const int hpc_default = mla_decode_heads_per_cta(p);
            if (hpc_default != 64) sweep.push_back({64, 0});
            for (int d : {2, 4, 8})
              if (s_auto / d >= 1 && s_auto / d < s_auto) sweep.push_back({64, s_auto / d});
            if (H > 16) {
              const int s16 = std::min(s_auto, mla_decode_num_splits(B, H, kTopk, 16));
              if (hpc_default != 16) sweep.push_back({16, 0});
              if (s16 / 2 >= 1) sweep.push_back({16, s16 / 2});
              if (s16 < s_auto) sweep.push_back({16, std::min(s_auto, 2 * s16)});  // two waves of 16-head CTAs
            }
          }
          // The sm_90a wgmma kernel at its default split (heads_per_cta -1 marks it in the sweep).
          // -2: its fp16-operand form (WgmmaF16, FP8 rows).
          if (mla_decode_wgmma_supported(p)) sweep.push_back({-1, 0});
          if (fp8 && mla_decode_wgmma_supported(p)) sweep.push_back({-2, 0});
          // -3: the fp16-operand form with crossover (MlaDecodeParams::crossover = 2: head-block pairs share each
          // tile's production), where the head blocks pair up and S is not the cluster merge's 2.
          if (fp8 && mla_decode_wgmma_supported(p) && (H + 63) / 64 % 2 == 0 &&
              !mla_decode_wgmma_merges_in_cluster(mla_decode_wgmma_splits(s_auto, kTopk)))
            sweep.push_back({-3, 0});
          for (auto [hpc, sp] : sweep) {
            // Records named mla_decode_* are the mma.sync kernels (what Auto ran before the wgmma kernel),
            // *_wgmma the wgmma kernel: the two side by side whatever Auto now picks.
            const bool wg = hpc < 0, f16 = hpc <= -2, xo = hpc == -3;
            p.crossover = xo ? 2 : 0;
            p.kernel = f16  ? MlaDecodeKernel::WgmmaF16
                       : wg ? MlaDecodeKernel::Wgmma
                       : fp8 ? MlaDecodeKernel::TensorCorePipelined : MlaDecodeKernel::TensorCore;
            p.heads_per_cta = wg ? 0 : hpc;
            p.splits = sp;
            std::vector<double> us = timer.time([&] { mla_decode_cuda(p, stream); });
            const double L = l.latent_dim, R = l.rope_dim;
            const double bytes = double(B) * kTopk * (kl.row_bytes + 4) + double(B) * H * (L + R) * 4 +
                                 double(B) * H * (L + 1) * 4;
            const double flops = 2.0 * B * H * kTopk * (2 * L + R);
            KernelBenchRecord r = make_record(std::string(fp8 ? "mla_decode_fp8" : "mla_decode_bf16") + (wg ? "_wgmma" : "") +
                                                  (f16 ? "_f16" : "") + (xo ? "_xo" : ""),
                                              us, bytes, flops, c);
            r.batch = B;
            r.heads = H;
            r.topk = kTopk;
            r.pool_tokens = rows;
            r.heads_per_cta = wg ? 64 : mla_decode_heads_per_cta(p);
            r.splits = sp > 0 ? sp
                       : wg   ? mla_decode_wgmma_splits(s_auto, kTopk)
                              : std::min(s_auto, mla_decode_num_splits(B, H, kTopk, r.heads_per_cta));
            r.check = mla_check + "; split-K workspace " + std::to_string(p.workspace_bytes) + " B" +
                      (sp > 0 ? "; splits " + std::to_string(sp) + " (tuning, default " + std::to_string(s_auto) + ")"
                              : "");
            progress(r);
            out.push_back(r);
          }
        }
      }
    }
  }

  // --- indexer scores and top-k over long contexts ---
  const std::string idx_check = kernel_bench_wants(opt, "indexer") ? check_indexer(stream) : std::string();
  if (!idx_check.empty()) std::fprintf(stderr, "bench kernels: indexer_score, topk\n");
  const IndexerLayout il{kIndexerDim, true};
  for (int64_t ctx : idx_check.empty() ? std::vector<int64_t>{} : std::vector<int64_t>{4096, 8192, 32768, 131072}) {
    // topk: a cluster of 8 blocks per request at B 1 / 8 from 32K, 4 at B 32, 1 at B 128 (topk_cluster_blocks)
    for (int B : opt.quick ? std::vector<int>{1} : std::vector<int>{1, 8, 32, 128}) {
      const int max_pages = int(ctx / kPageSize), Hi = kIndexerHeads, D = kIndexerDim;
      const int64_t pages = int64_t(B) * max_pages;
      Buffer cache(Where::Device, size_t(pages) * il.page_bytes(), "bench indexer key cache");
      {  // fill 1024 pages with real FP8 keys, then repeat them over the cache
        const int64_t fill_pages = std::min<int64_t>(pages, 1024), fill_rows = fill_pages * kPageSize;
        Buffer small_pool(Where::Device, size_t(fill_rows) * l.row_bytes, "bench fill pool");
        kv_fill_random_cuda({small_pool.as<uint8_t>(), l, cache.as<uint8_t>(), il, 0, fill_rows, seed}, stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));
        const size_t chunk = size_t(fill_pages) * il.page_bytes();
        for (int64_t pg = fill_pages; pg < pages; pg += fill_pages) {
          const size_t len = size_t(std::min(fill_pages, pages - pg)) * il.page_bytes();
          CUDA_CHECK(cudaMemcpy(cache.as<uint8_t>() + size_t(pg) * il.page_bytes(), cache.data(), std::min(len, chunk),
                                cudaMemcpyDeviceToDevice));
        }
      }
      std::vector<int32_t> bt = shuffled_pages(B, max_pages, seed + ctx);
      std::vector<int32_t> seq(B, int32_t(ctx));
      std::vector<float> q(size_t(B) * Hi * D), w(size_t(B) * Hi);
      for (size_t i = 0; i < q.size(); ++i) q[i] = rng_normal(seed, 22, i);
      for (size_t i = 0; i < w.size(); ++i) w[i] = rng_normal(seed, 23, i);
      Buffer dq = to_device(q, "bench indexer q"), dw = to_device(w, "bench indexer weights"),
             dbt = to_device(bt, "bench block table"), dseq = to_device(seq, "bench seq lens"),
             scores(Where::Device, size_t(B) * ctx * 4, "bench scores"),
             slots(Where::Device, size_t(B) * kTopk * 4, "bench top-k slots");
      IndexerScoreParams sp{.q = dq.as<float>(), .head_weights = dw.as<float>(),
                            .head_weight_scale = 1.f / std::sqrt(float(Hi)), .key_cache = cache.as<uint8_t>(),
                            .layout = il, .block_table = dbt.as<int32_t>(), .max_pages = max_pages,
                            .seq_lens = dseq.as<int32_t>(), .scores = scores.as<float>(), .B = B, .Hi = Hi,
                            .softmax_scale = 1.f / std::sqrt(float(D))};
      const double score_bytes = double(B) * ctx * (il.bytes_per_token() + 4) + double(pages) * 4 +
                                 double(B) * Hi * (D + 1) * 4;
      const double topk_bytes = double(B) * ctx * 4 + double(B) * kTopk * 4;
      {
        std::vector<double> us = timer.time([&] { indexer_score_cuda(sp, stream); });
        KernelBenchRecord r = make_record("indexer_score", us, score_bytes, 2.0 * B * ctx * Hi * D, c);
        r.batch = B;
        r.heads = Hi;
        r.context = ctx;
        r.check = idx_check;
        progress(r);
        out.push_back(r);
      }
      {
        TopkParams tp{scores.as<float>(), int(ctx), dseq.as<int32_t>(), dbt.as<int32_t>(), max_pages,
                      slots.as<int32_t>(), B, kTopk};
        std::vector<double> us = timer.time([&] { topk_cuda(tp, stream); });
        KernelBenchRecord r = make_record("topk", us, topk_bytes, 0, c);
        r.batch = B;
        r.topk = kTopk;
        r.context = ctx;
        r.check = idx_check;
        progress(r);
        out.push_back(r);
        // Tuning: every cluster size at B 1 (time vs blocks per request: fixed cost vs per-key cost).
        for (int cl : B == 1 && !opt.quick && ctx >= 8192 ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{}) {
          tp.cluster = cl;
          std::vector<double> ust = timer.time([&] { topk_cuda(tp, stream); });
          KernelBenchRecord rt = make_record("topk", ust, topk_bytes, 0, c);
          rt.batch = B;
          rt.topk = kTopk;
          rt.context = ctx;
          rt.splits = cl;
          rt.check = idx_check + "; cluster " + std::to_string(cl) + " (tuning, default automatic)";
          progress(rt);
          out.push_back(rt);
        }
        tp.cluster = 0;
        // The two forms of the passes after the first (TopkParams::gather): the three cluster passes, for comparison.
        tp.gather = false;
        std::vector<double> usg = timer.time([&] { topk_cuda(tp, stream); });
        tp.gather = true;
        KernelBenchRecord rg = make_record("topk", usg, topk_bytes, 0, c);
        rg.batch = B;
        rg.topk = kTopk;
        rg.context = ctx;
        rg.check = idx_check + "; three cluster passes (--topk-gather off; default: gathered)";
        progress(rg);
        out.push_back(rg);
        // The pair as the decode step runs it: the score kernel builds the top-k's first-digit histogram
        // (IndexerScoreParams / TopkParams::top_hist, the default) or the top-k makes its own (--topk-score-hist off).
        // Every repetition runs both kernels, so the histogram is zero again when the next score kernel starts.
        // Third form: the histogram and the flat top-k (TopkParams::flat_workspace, --topk-flat on) where it fits.
        Buffer hist(Where::Device, size_t(B) * kTopkHistCopies * kTopkHistBins * 4, "bench top-k histogram");
        CUDA_CHECK(cudaMemset(hist.data(), 0, hist.bytes()));
        const bool flat_fits = topk_flat_fits_here(B, int(ctx));
        Buffer flat_ws(Where::Device, flat_fits ? topk_flat_workspace_bytes(B, int(ctx)) : 16, "bench top-k flat workspace");
        CUDA_CHECK(cudaMemset(flat_ws.data(), 0, flat_ws.bytes()));
        for (int form = 0; form < (flat_fits ? 3 : 2); ++form) {
          const bool with_hist = form != 1, flat = form == 2;
          IndexerScoreParams s2 = sp;
          TopkParams t2 = tp;
          s2.top_hist = t2.top_hist = with_hist ? hist.as<unsigned>() : nullptr;
          if (flat) {
            t2.flat_workspace = flat_ws.data();
            t2.flat_workspace_bytes = flat_ws.bytes();
          }
          std::vector<double> usp = timer.time([&] {
            indexer_score_cuda(s2, stream);
            topk_cuda(t2, stream);
          });
          KernelBenchRecord rp =
              make_record("indexer_score_topk", usp, score_bytes + topk_bytes, 2.0 * B * ctx * Hi * D, c);
          rp.batch = B;
          rp.heads = Hi;
          rp.topk = kTopk;
          rp.context = ctx;
          rp.check = idx_check + (flat        ? "; histogram built by the score kernel, flat top-k (--topk-flat on)"
                                  : with_hist ? "; first-digit histogram built by the score kernel (default)"
                                              : "; the top-k's own first pass (--topk-score-hist off)");
          progress(rp);
          out.push_back(rp);
        }
      }
    }
  }
  // --- projections: FP8 block-scaled GEMV (linear_fp8) vs cuBLASLt BF16 at GLM-5's decode shapes ---
  // Floor = weight bytes (+ scales, x, y) over the measured copy bandwidth: at m <= 16 a projection is
  // a weight read. The FP8 path is first checked against linear_cpu on 64 rows.
  if (kernel_bench_wants(opt, "linear")) {
    std::fprintf(stderr, "bench kernels: linear_fp8, linear_bf16\n");
    LinearContext ctx;
    ctx.fp8_mma_max_m = 0;  // linear_fp8 = the GEMV here; the tensor-core path: bench_linear_mma
    const std::pair<int, int> shapes[] = {{6144, 16384}, {16384, 2048}, {2048, 6144}, {4096, 6144}};  // o_proj, q_b, q_a, gate_up
    for (auto [n, k] : shapes) {
      const size_t nk = size_t(n) * k, nb = size_t((n + 127) / 128) * ((k + 127) / 128);
      std::vector<uint8_t> codes(nk);
      std::vector<float> scales(nb);
      for (size_t i = 0; i < nk; i += 8) {
        const uint64_t h = splitmix64(seed ^ (i * 0x9e37u));
        for (size_t q = 0; q < 8 && i + q < nk; ++q) codes[i + q] = uint8_t((h >> (8 * q)) & 0x77u);  // finite codes
      }
      for (size_t i = 0; i < nb; ++i) scales[i] = (0.5f + rng_uniform(seed, 31, i)) / 448.f;
      Buffer dw = to_device(codes, "bench fp8 weight"), ds = to_device(scales, "bench fp8 scales");
      Buffer wb(Where::Device, nk * 2, "bench bf16 weight");
      fill_bf16_device(wb.data(), nk, seed, 32);
      for (int m : {1, 8, 16}) {
        std::vector<float> x(size_t(m) * k);
        for (size_t i = 0; i < x.size(); ++i) x[i] = rng_normal(seed, 33, i);
        Buffer dx = to_device(x, "bench x"), dy(Where::Device, size_t(m) * n * 4, "bench y");
        LinearParams p{dx.as<float>(), dw.data(), DType::F8_E4M3, dy.as<float>(), m, n, k, false, false};
        p.w_scale = ds.as<float>();
        linear_cuda(p, ctx, stream);
        std::vector<float> ref;  // the twin's first 64 rows, for the TMA GEMV's check below
        const double err = fp8_twin_rel_err(p, dy, stream, linear_cpu, x, codes, scales, &ref);
        require(err < 1e-5, "bench kernels: linear_fp8 disagrees with linear_cpu (max rel err " + sci(err) +
                                " of sum |x w|)");
        for (bool fp8 : {true, false}) {
          LinearParams q = p;
          if (!fp8) {
            q.w = wb.data();
            q.w_dtype = DType::BF16;
            q.w_scale = nullptr;
          }
          std::vector<double> us = timer.time([&] { linear_cuda(q, ctx, stream); });
          const double bytes = double(nk) * (fp8 ? 1 : 2) + (fp8 ? double(nb) * 4 : 0.0) + double(m) * k * 4 + double(m) * n * 4;
          KernelBenchRecord r = make_record(fp8 ? "linear_fp8" : "linear_bf16", us, bytes, 2.0 * m * double(nk), c);
          r.batch = m;
          r.n = n;
          r.k = k;
          r.check = fp8 ? "vs linear_cpu, 64 rows: max rel err " + sci(err) : "cuBLASLt (checked in gpu_linear)";
          progress(r);
          out.push_back(r);
        }
        if (m == 1 && linear_fp8_tma_supported(p)) bench_linear_fp8_tma(p, ref, stream, timer, c, out);
      }
    }
  }
  if (kernel_bench_wants(opt, "linear")) bench_linear_mma(opt, stream, timer, c, seed, out);
  if (kernel_bench_wants(opt, "moe")) bench_moe_grouped(opt, stream, timer, c, seed, false, out);
  else if (kernel_bench_wants(opt, "moe-pair")) bench_moe_grouped(opt, stream, timer, c, seed, true, out);
  if (kernel_bench_wants(opt, "absorb")) bench_absorb(stream, timer, c, opt.quick, seed, out);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

const std::vector<std::string>& kernel_bench_families() {
  static const std::vector<std::string> names{"cast", "mla", "indexer", "linear", "absorb", "moe", "moe-pair"};
  return names;
}

bool kernel_bench_wants(const KernelBenchOptions& opt, const std::string& name) {
  return opt.only.empty() || std::find(opt.only.begin(), opt.only.end(), name) != opt.only.end();
}

nlohmann::json kernel_bench_json(const std::vector<KernelBenchRecord>& records) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : records)
    list.push_back({{"kernel", r.kernel},
                    {"batch", r.batch},
                    {"heads", r.heads},
                    {"topk", r.topk},
                    {"context", r.context},
                    {"pool_tokens", r.pool_tokens},
                    {"median_us", r.median_us},
                    {"min_us", r.min_us},
                    {"max_us", r.max_us},
                    {"reps", r.reps},
                    {"bytes", r.bytes},
                    {"flops", r.flops},
                    {"achieved_gbps", r.achieved_gbps},
                    {"tflops", r.tflops},
                    {"roofline_fraction", r.roofline_fraction},
                    {"copy_gbps_measured", r.copy_gbps_measured},
                    {"bf16_tflops_measured", r.bf16_tflops_measured},
                    {"read_gbps_measured", r.read_gbps_measured},
                    {"n", r.n},
                    {"k", r.k},
                    {"splits", r.splits},
                    {"heads_per_cta", r.heads_per_cta},
                    {"check", r.check}});
  return list;
}

std::string kernel_bench_table(const std::vector<KernelBenchRecord>& records) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %5s %5s %8s %8s %5s %4s %11s %9s %9s %9s\n", "kernel", "batch",
                "heads", "context", "pool", "split", "hpc", "median_us", "GB/s", "TFLOP/s", "roofline");
  s += line;
  for (const auto& r : records) {
    std::snprintf(line, sizeof line, "%-16s %5d %5d %8lld %8lld %5d %4d %11.1f %9.0f %9.1f %8.1f%%\n",
                  r.kernel.c_str(), r.batch, r.heads, (long long)r.context, (long long)r.pool_tokens, r.splits,
                  r.heads_per_cta, r.median_us,
                  r.achieved_gbps, r.tflops, 100.0 * r.roofline_fraction);
    s += line;
  }
  if (!records.empty()) {
    std::snprintf(line, sizeof line,
                  "ceilings measured in this run: copy %.0f GB/s, BF16 GEMM %.1f TFLOP/s (read-only stream %.0f GB/s, "
                  "not in the roofline)\n",
                  records.front().copy_gbps_measured, records.front().bf16_tflops_measured,
                  records.front().read_gbps_measured);
    s += line;
  }
  return s;
}

}  // namespace glm5
