// CPU twins of MLA weight absorption / un-absorption (DeepSeek-V2 paper, section 2.1.2): plain
// loops over kv_b_proj's per-head blocks W_UK[h] (nope x L) and W_UV[h] (v x L), double sums.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/kv_layout.h"
#include "kernels/mla_absorb.h"

namespace glm5 {

namespace {
void validate_common(const char* op, const char* params, const void* kv_b, DType dtype, int B, int H, int nope, int v,
                     int L, bool allow_f32_weight) {
  const std::string where = std::string(op) + ": " + params + ".";
  require(kv_b != nullptr, where + "kv_b is null");
  const bool dtype_ok = dtype == DType::BF16 || (allow_f32_weight && dtype == DType::F32);
  require(dtype_ok, where + "kv_b_dtype = " + dtype_name(dtype) + (allow_f32_weight ? ", expected F32 or BF16" : ", expected BF16"));
  const std::pair<const char*, int> dims[] = {{"B", B}, {"H", H}, {"nope", nope}, {"v", v}, {"L", L}};
  for (const auto& [name, value] : dims)
    require(value > 0, where + name + " = " + std::to_string(value) + ", expected > 0");
}

// Row `row` of kv_b as fp32 into `out` (L values).
void load_row(const void* kv_b, DType dtype, size_t row, int L, float* out) {
  if (dtype == DType::F32) {
    const float* w = static_cast<const float*>(kv_b) + row * L;
    for (int c = 0; c < L; ++c) out[c] = w[c];
  } else {
    const uint16_t* w = static_cast<const uint16_t*>(kv_b) + row * L;
    for (int c = 0; c < L; ++c) out[c] = bf16_bits_to_float(w[c]);
  }
}

// Fast-path plan shared by absorb (K = nope, N = L, tile 64 columns) and unabsorb (K = L, N = v, tile
// 32 rows), as mla_absorb.cu's tile_gemm_kernel lays out shared memory: the W tile in fp32
// (K * tile) plus the activation stage X[K][4 * groups], reused as the split-K reduction buffer of
// one partial per warp (small batches, slices inside a warp summed by shuffles) or per K slice,
// each [4 * groups][tile] plus a bank skew of 4 floats. The batch pass is the smallest power-of-two
// group count covering B, as large as keeps two CTAs per SM (<= 110 KB), at most 256 / (tile / 8).
// Shapes where the simple kernels measured faster on the H200 (bench kernels --only absorb, round 1
// of the tiled kernels, GLM-5 dims, H 64 and 16; H <= 16 is taken as 16, larger H as 64): the plan
// never picks a slower path. Round 1 (us, tiled / simple): absorb H64 B1 17.1/24.7, B8 28.6/25.4,
// B32 75.6/69.3, B128 266/221; H16 B8 14.3/21.6, B32 34.3/22.6; unabsorb B1 26.7/13.8 (H64),
// 12.6/7.6 (H16), H64 B8 39.5/45.9, B128 397/519; H16 B8 18.9/15.6, B128 187/137. Round 2 (batched
// X staging, per-device attributes) is expected to move these: re-derive from the _tiled records.
// From the H200 measurement of the tiled kernels after their round-2 fixes (device call H2 of
// 2026-11-29, reports/2026-11-29-h200-projection-kernels.md, µs tiled vs simple): absorb H 64 tiled at
// every B (B 1: 15.8 vs 24.8, B 32: 59.0 vs 69.5, B 128: 197.5 vs 221.0); absorb H 16 simple above
// B 16 (B 32: 25.2 vs 22.7, B 128: 81.1 vs 65.0); unabsorb simple at B <= 4 (B 1, H 64: 22.4 vs 13.9)
// and tiled from B 8 (H 16, B 128: 68.7 vs 137.0; H 64, B 8: 28.4 vs 46.0).
bool simple_measured_faster(bool absorb, int B, int H) {
  if (absorb) return H <= 16 && B > 16;
  return B <= 4;
}

MlaAbsorbPlan plan_fast(const void* kv_b, DType dtype, int B, int H, int K, int N, int L, int tile, bool absorb) {
  MlaAbsorbPlan plan;
  plan.tile = tile;
  plan.ctas = H * ((N + tile - 1) / tile);
  const bool aligned = aligned16(kv_b) && L % (dtype == DType::BF16 ? 8 : 4) == 0;
  const int cg = tile / 8;
  auto smem = [&](int groups) {
    const int ks = 256 / cg / groups, kpw = std::max(1, 32 / cg / groups), nred = ks / kpw;
    const size_t red = ks == 1 ? 0 : size_t(nred) * 4 * groups * tile + 4 * nred;
    return sizeof(float) * (size_t(K) * tile + std::max<size_t>(size_t(K) * 4 * groups, red));
  };
  const int max_groups = 256 / cg;
  int groups = 1;
  while (groups < max_groups && 4 * groups < B && smem(2 * groups) <= 110 * 1024) groups *= 2;
  plan.batch_groups = groups;
  plan.passes = (B + 4 * groups - 1) / (4 * groups);
  plan.smem_bytes = smem(groups);
  plan.simple_faster = simple_measured_faster(absorb, B, H);
  plan.eligible = aligned && plan.smem_bytes <= kMlaAbsorbMaxSmem;
  plan.fast = plan.eligible && !plan.simple_faster;
  return plan;
}
}  // namespace

// The GEMV kernels (mla_absorb.cu) for B <= 4: they read W once without staging it in shared memory.
// Where they run, from the H200 measurement (device call P1a of 2026-11-29 session 4, `bench kernels
// --only absorb`, us, gemv / tiled / simple): unabsorb at every B <= 4 (H 64 B 1: 11.2 / 22.8 / 14.0,
// B 4: 17.6 / 25.2 / 30.1; H 16 B 4: 9.6 / 10.3 / 10.9); absorb only at B 1 with H > 16 (H 64: 13.6 /
// 16.1 / 25.5; H 64 B 4: 23.2 / 19.3; H 16 B 1: 10.3 / 8.0).
static void plan_gemv(MlaAbsorbPlan& plan, bool absorb, const void* kv_b, DType dtype, int B, int H, int L,
                      bool activations_aligned) {
  plan.gemv_eligible = B <= 4 && dtype == DType::BF16 && aligned16(kv_b) && L % 8 == 0 && activations_aligned;
  plan.gemv = plan.gemv_eligible && (!absorb || (B == 1 && H > 16));
  if (plan.gemv) plan.fast = false;
}

// The tensor-core kernels (mla_absorb.cu, tc_gemm_kernel): W tile of 64 output columns in shared memory as BF16 with
// 8 elements of padding per row; A fragments are float2 loads of X (8-byte aligned rows).
// Where the dispatch takes them, from the H200 (S15a / S15b, `bench kernels --only absorb`, us, tc against the best
// other kernel): absorb from batch 2 (H 64 B 4: 12.9 / 19.2 tiled; B 1: 12.5 / 13.5 gemv, within noise, the GEMV
// kept; H 16 B 4: 8.9 / 9.1); unabsorb from batch 5 at H > 16 (H 64 B 8: 19.7 / 29.2; B 4: 19.2 / 17.2 gemv) and
// above batch 16 at H <= 16 (H 16 B 8: 14.5 / 12.0 tiled, only 64 CTAs of 64 KB; B 32: 15.4 / 22.3).
static bool tc_measured_faster(bool absorb, int B, int H) {
  if (absorb) return B >= 2;
  return B >= kMlaAbsorbTcMinBatch && (H > 16 || B > 16);
}

static void plan_tc(MlaAbsorbPlan& plan, bool absorb, const void* kv_b, DType dtype, int B, int H, int K, int L,
                    size_t smem, bool activations_aligned, bool allowed) {
  plan.tc_smem_bytes = smem;
  plan.tc_eligible = dtype == DType::BF16 && aligned16(kv_b) && L % 8 == 0 && K % 16 == 0 && activations_aligned &&
                     smem <= kMlaAbsorbMaxSmem;
  plan.tc = allowed && plan.tc_eligible && tc_measured_faster(absorb, B, H) && !plan.gemv;
  if (plan.tc) plan.fast = false;
}

MlaAbsorbPlan plan_mla_absorb(const MlaAbsorbParams& p) {
  validate_mla_absorb_params(p, "plan_mla_absorb", true);
  MlaAbsorbPlan plan = plan_fast(p.kv_b, p.kv_b_dtype, p.B, p.H, p.nope, p.L, p.L, 64, true);
  plan_gemv(plan, true, p.kv_b, p.kv_b_dtype, p.B, p.H, p.L, true);  // q is read a float at a time
  plan_tc(plan, true, p.kv_b, p.kv_b_dtype, p.B, p.H, p.nope, p.L, size_t(p.nope) * (64 + 8) * 2,
          reinterpret_cast<uintptr_t>(p.q) % 8 == 0 && p.q_head_stride % 2 == 0, p.tensor_cores);
  return plan;
}

MlaAbsorbPlan plan_mla_unabsorb(const MlaUnabsorbParams& p) {
  validate_mla_unabsorb_params(p, "plan_mla_unabsorb", true);
  MlaAbsorbPlan plan = plan_fast(p.kv_b, p.kv_b_dtype, p.B, p.H, p.L, p.v, p.L, 32, false);
  plan_gemv(plan, false, p.kv_b, p.kv_b_dtype, p.B, p.H, p.L, aligned16(p.o_latent));  // float4 loads
  plan_tc(plan, false, p.kv_b, p.kv_b_dtype, p.B, p.H, p.L, p.L, size_t(64) * (p.L + 8) * 2,
          reinterpret_cast<uintptr_t>(p.o_latent) % 8 == 0, p.tensor_cores);
  return plan;
}

void validate_mla_absorb_params(const MlaAbsorbParams& p, const char* op, bool allow_f32_weight) {
  const std::string where = std::string(op) + ": MlaAbsorbParams.";
  require(p.q != nullptr, where + "q is null");
  require(p.q_latent != nullptr, where + "q_latent is null");
  validate_common(op, "MlaAbsorbParams", p.kv_b, p.kv_b_dtype, p.B, p.H, p.nope, p.v, p.L, allow_f32_weight);
  require(p.q_head_stride >= p.nope, where + "q_head_stride = " + std::to_string(p.q_head_stride) +
                                         ", expected >= nope = " + std::to_string(p.nope));
}

void validate_mla_unabsorb_params(const MlaUnabsorbParams& p, const char* op, bool allow_f32_weight) {
  const std::string where = std::string(op) + ": MlaUnabsorbParams.";
  require(p.o_latent != nullptr, where + "o_latent is null");
  require(p.out != nullptr, where + "out is null");
  validate_common(op, "MlaUnabsorbParams", p.kv_b, p.kv_b_dtype, p.B, p.H, p.nope, p.v, p.L, allow_f32_weight);
}

// q_latent[b,h,c] = sum_d q[b,h,d] * W_UK[h][d][c],  W_UK[h][d] = kv_b row h*(nope+v) + d.
void mla_absorb_cpu(const MlaAbsorbParams& p) {
  validate_mla_absorb_params(p, "mla_absorb_cpu", true);
  std::vector<float> w(p.L);
  std::vector<double> acc(p.L);
  for (int b = 0; b < p.B; ++b) {
    for (int h = 0; h < p.H; ++h) {
      const float* q = p.q + (size_t(b) * p.H + h) * p.q_head_stride;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int d = 0; d < p.nope; ++d) {
        load_row(p.kv_b, p.kv_b_dtype, size_t(h) * (p.nope + p.v) + d, p.L, w.data());
        for (int c = 0; c < p.L; ++c) acc[c] += double(q[d]) * double(w[c]);
      }
      float* out = p.q_latent + (size_t(b) * p.H + h) * p.L;
      for (int c = 0; c < p.L; ++c) out[c] = float(acc[c]);
    }
  }
}

// out[b, h*v + j] = sum_c o_latent[b,h,c] * W_UV[h][j][c],  W_UV[h][j] = kv_b row h*(nope+v) + nope + j.
void mla_unabsorb_cpu(const MlaUnabsorbParams& p) {
  validate_mla_unabsorb_params(p, "mla_unabsorb_cpu", true);
  std::vector<float> w(p.L);
  for (int b = 0; b < p.B; ++b) {
    for (int h = 0; h < p.H; ++h) {
      const float* o = p.o_latent + (size_t(b) * p.H + h) * p.L;
      for (int j = 0; j < p.v; ++j) {
        load_row(p.kv_b, p.kv_b_dtype, size_t(h) * (p.nope + p.v) + p.nope + j, p.L, w.data());
        double sum = 0.0;
        for (int c = 0; c < p.L; ++c) sum += double(o[c]) * double(w[c]);
        p.out[size_t(b) * p.H * p.v + size_t(h) * p.v + j] = float(sum);
      }
    }
  }
}

}  // namespace glm5
