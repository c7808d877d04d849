// `glm5prof bench kernels`: the KV-path kernels (issue 3) timed against the two ceilings measured in
// the same run. For each kernel and shape: the bytes and FLOPs it must move (a minimum model, below),
// the median of CUDA-event times over `reps` launches after `warmup` launches, with a 256 MiB buffer
// memset between launches (outside the timed region) so every launch starts with a cold 50 MB L2;
// achieved GB/s = bytes / time, TFLOP/s = flops / time, and
//   roofline_fraction = max(bytes / copy_bw, flops / bf16_peak) / time
// where copy_bw is a 1 GiB cudaMemcpy D2D (2 GiB read + written) and bf16_peak a cuBLASLt BF16 GEMM
// 8192 x 8192 x 8192 (fp32 accumulation), both timed the same way in the same run. A third ceiling, the
// read-only stream (kernels/read_stream.h, `read_stream` records, read_gbps_measured), is reported beside them for
// the weight-streaming kernels, which only read; it does not enter roofline_fraction.
// Every kernel variant is first checked against its CPU twin on fresh random data (small shapes);
// a mismatch throws glm5::Error and nothing is timed.
//
// Byte models (GLM-5: L = 512, R = 64, FP8 row 656 B, BF16 row 1152 B, indexer D = 128, Hi = 32):
//   kv_cast            rows * (656 + 1152)
//   kv_gather_cast     B * topk * (656 + 1152 + 4 + 4)               (indices in, compact indices out)
//   mla_decode fp8     B * topk * (656 + 4) + B*H*(L+R)*4 + B*H*(L+1)*4   (each selected row once)
//   mla_decode bf16    the same with 1152-byte rows (the cast path's full BF16 pool)
//   indexer_score      B * ctx * (D + 4 + 4) + B * ctx/64 * 4 + B*Hi*(D+1)*4
//   topk               B * ctx * 4 + B * topk * 4
// FLOP models: mla_decode 2*B*H*topk*(2L + R) (QK^T over L+R, PV over L); indexer_score
// 2*B*ctx*Hi*D; the casts and topk 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glm5 {

// The bench's top-k (GLM-5's index_topk) and the smallest pool it runs on: 4 x top-k, so that a batch of random
// selections has rows to choose from (run_kernel_bench refuses less; the CLI's --pool-tokens range starts here).
inline constexpr int kKernelBenchTopk = 2048;
inline constexpr int64_t kKernelBenchMinPoolTokens = 4 * kKernelBenchTopk;

struct KernelBenchOptions {
  int warmup = 3;
  int reps = 20;               // >= 1; the issue asks for >= 20
  int64_t pool_tokens = 495000;  // FP8 pool rows for kv_cast, kv_gather_cast and mla_decode
  bool quick = false;          // fewer shapes (batch 1 and 64 only), for a fast look
  // Kernel families to run (empty: all): "cast" (kv_cast, kv_gather_cast), "mla" (mla_decode),
  // "indexer" (indexer_score, topk), "linear" (linear_fp8 / linear_bf16), "absorb" (mla_absorb /
  // mla_unabsorb), "moe" (grouped experts; FP8 also at batch 1), "moe-pair" (only moe's batch-1 FP8 per-token
  // kernels). The two ceilings always run. Unknown names: glm5::Error.
  std::vector<std::string> only;
};
// Whether family `name` is selected by opt.only (kernel_bench_families() lists the valid names).
bool kernel_bench_wants(const KernelBenchOptions& opt, const std::string& name);
const std::vector<std::string>& kernel_bench_families();

struct KernelBenchRecord {
  std::string kernel;  // copy_d2d, gemm_bf16, kv_cast, kv_gather_cast, mla_decode_fp8, mla_decode_bf16, indexer_score, topk
  int batch = 0, heads = 0, topk = 0;
  int64_t context = 0, pool_tokens = 0;
  double median_us = 0, min_us = 0, max_us = 0;
  double bytes = 0, flops = 0;
  double achieved_gbps = 0, tflops = 0, roofline_fraction = 0;
  double copy_gbps_measured = 0, bf16_tflops_measured = 0;
  double read_gbps_measured = 0;  // best read_stream shape of the run (kernels/read_stream.h); context, not roofline
  int reps = 0;
  int64_t n = 0, k = 0;  // linear_fp8 / linear_bf16: the weight's [n, k] (batch = m tokens)
  int splits = 0;         // mla_decode: split-K chunks per request (the default's or a tuning value)
  int heads_per_cta = 0;  // mla_decode: query heads per CTA (64, or 16-head slices)
  std::string check;  // the correctness check that preceded the timing ("bit-identical", "max rel err 1e-7", ...)
};

// Runs every kernel and shape on the current CUDA device. Throws glm5::Error without a device, on
// a CUDA / cuBLASLt failure, or when a kernel disagrees with its CPU twin.
std::vector<KernelBenchRecord> run_kernel_bench(const KernelBenchOptions& opt);

nlohmann::json kernel_bench_json(const std::vector<KernelBenchRecord>& records);
// A fixed-width table: kernel, batch, heads, context/pool, median us, GB/s, TFLOP/s, roofline %.
std::string kernel_bench_table(const std::vector<KernelBenchRecord>& records);

}  // namespace glm5
