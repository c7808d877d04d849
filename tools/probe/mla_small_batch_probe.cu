// Where batch 1's sparse MLA decode loses its time (issue 4: attn.mla is 20.5 us per layer at batch 1 against a
// 0.4 us byte floor). A diagnostic, not a test: for GLM-5's shape (64 heads, top-k 2048, FP8 656-byte rows from a
// 495,000-row pool, random indices) at batch 1, 2 and 4 it times mla_decode_cuda (decode + combine) for each kernel
// (TensorCore mma.sync at 16 and 64 heads per CTA, Wgmma) and split count, and the decode alone where it needs no
// combine (S = 1; Wgmma S = 2 merges in a cluster). Every variant's output is compared with Auto's (same values,
// same rounding: the kernels differ only in summation order, so max |diff| / max |out| must stay near fp32 order).
// Timing: median of 15 CUDA-event timings, each after a 256 MiB memset (cold L2; common/cold_timer.h), and the
// median of 15 launches each timed alone (warm: the rows stay in L2; these include the host's launch gap).
// Build: nvcc -std=c++20 --expt-relaxed-constexpr -O3 -arch=sm_90a -I. -Isrc tools/probe/mla_small_batch_probe.cu
//          build-lead/libglm5_kernels.a build-lead/libglm5_kernels_sm90a.a build-lead/libglm5_kernels.a
//          build-lead/libglm5_common.a -lcuda -o build-lead/mla_small_batch_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/cold_timer.h"
#include "common/error.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_layout.h"
#include "kernels/mla_decode.h"
#include "tools/probe/chained_timer.cuh"

using namespace glm5;


int main() {
  const LatentLayout l = make_latent_layout(512, 64, true);
  const int64_t pool_rows = 495000;
  const int H = 64, topk = 2048, L = 512, R = 64;
  Buffer pool(Where::Device, size_t(pool_rows) * l.row_bytes, "pool");
  kv_fill_random_cuda({pool.as<uint8_t>(), l, nullptr, {}, 0, pool_rows, 1234}, nullptr);
  std::mt19937_64 g(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  ColdTimer cold(nullptr, 2, 15);
  std::printf("%-30s %4s %9s %9s %12s\n", "variant", "S", "cold_us", "warm_us", "rel_diff");
  for (int B : {1, 2, 4}) {
    std::vector<float> q(size_t(B) * H * L), qr(size_t(B) * H * R);
    for (float& x : q) x = u(g);
    for (float& x : qr) x = u(g);
    std::vector<int32_t> idx(size_t(B) * topk);
    for (int32_t& i : idx) i = int32_t(g() % uint64_t(pool_rows));
    Buffer d_q(Where::Device, q.size() * 4, "q"), d_qr(Where::Device, qr.size() * 4, "q_rope");
    Buffer d_idx(Where::Device, idx.size() * 4, "idx"), d_out(Where::Device, q.size() * 4, "out");
    Buffer d_lse(Where::Device, size_t(B) * H * 4, "lse");
    const size_t ws_bytes = mla_decode_workspace_bytes(B, H, topk, L);
    Buffer d_ws(Where::Device, std::max<size_t>(ws_bytes, 16), "workspace");
    CUDA_CHECK(cudaMemcpy(d_q.data(), q.data(), q.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_qr.data(), qr.data(), qr.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_idx.data(), idx.data(), idx.size() * 4, cudaMemcpyHostToDevice));
    MlaDecodeParams base{};
    base.q_latent = d_q.as<float>();
    base.q_rope = d_qr.as<float>();
    base.q_rope_row_stride = H * R;
    base.q_rope_head_stride = R;
    base.kv = pool.as<uint8_t>();
    base.layout = l;
    base.indices = d_idx.as<int32_t>();
    base.out = d_out.as<float>();
    base.lse = d_lse.as<float>();
    base.B = B;
    base.H = H;
    base.topk = topk;
    base.scale = 1.f / std::sqrt(576.f);
    base.workspace = d_ws.as<float>();
    base.workspace_bytes = ws_bytes;
    mla_decode_cuda(base, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ref(q.size()), got(q.size());
    CUDA_CHECK(cudaMemcpy(ref.data(), d_out.data(), ref.size() * 4, cudaMemcpyDeviceToHost));
    float ref_max = 0;
    for (float x : ref) ref_max = std::max(ref_max, std::fabs(x));
    struct V {
      std::string name;
      MlaDecodeKernel k;
      int hpc, splits;
    };
    std::vector<V> vs{{"auto", MlaDecodeKernel::Auto, 0, 0}};
    const int s_max = mla_decode_num_splits(B, H, topk);
    for (int hpc : {16, 64})
      for (int s : {1, 2, 4, 8, 16, 32, 64})
        if (s <= s_max) vs.push_back({"tc_pipelined h" + std::to_string(hpc), MlaDecodeKernel::TensorCorePipelined, hpc, s});
    for (int s : {1, 2, 4, 8, 16, 32})
      if (s <= s_max) vs.push_back({"wgmma", MlaDecodeKernel::Wgmma, 0, s});
    for (const V& v : vs) {
      MlaDecodeParams p = base;
      p.kernel = v.k;
      p.heads_per_cta = v.hpc;
      p.splits = v.splits;
      if (v.splits == 1) {  // the single-pass kernel: no workspace
        p.workspace = nullptr;
        p.workspace_bytes = 0;
      }
      try {
        CUDA_CHECK(cudaMemset(d_out.data(), 0, d_out.bytes()));
        mla_decode_cuda(p, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(got.data(), d_out.data(), got.size() * 4, cudaMemcpyDeviceToHost));
        float d = 0;
        for (size_t i = 0; i < got.size(); ++i) d = std::max(d, std::fabs(got[i] - ref[i]));
        const double c = cold.median_us([&] { mla_decode_cuda(p, nullptr); });
        const double w = probe::single_us([&] { mla_decode_cuda(p, nullptr); }, 15);  // L2 warm, each call alone
        char name[64];
        std::snprintf(name, sizeof name, "B%d %s", B, v.name.c_str());
        std::printf("%-30s %4d %9.1f %9.1f %12.2e%s\n", name, v.splits, c, w, d / ref_max, d / ref_max > 1e-3 ? "  MISMATCH" : "");
      } catch (const std::exception& e) {
        std::printf("B%d %s S %d: %s\n", B, v.name.c_str(), v.splits, e.what());
      }
    }
  }
  return 0;
}
