// Phase timing of the sm_90a wgmma MLA decode kernel (kernels/sm90a/mla_decode_wgmma.cu compiled with
// GLM5_MLA_WGMMA_PROBE): for each shape, the median of 10 timed launches, then the clock64() cycles each
// warpgroup's thread 0 spent per phase, averaged over CTAs and tiles. A diagnostic, not a test: inputs are
// random bytes (codes masked to finite e4m3; the rope bf16 in [-1, 1]), correctness is gpu_mla_decode's job.
// Build (here, no GPU needed): tools/probe/build.sh; run on the device: .device/bin/mla_wgmma_probe
// (GLM5_PROBE_F16=1 in the environment: the fp16-operand form).
#define GLM5_MLA_WGMMA_PROBE 1
#include "kernels/sm90a/mla_decode_wgmma.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "common/dtype.h"

using namespace glm5;

int main() {
  const bool f16 = std::getenv("GLM5_PROBE_F16") != nullptr;  // the fp16-operand form (MlaDecodeKernel::WgmmaF16)
  // GLM5_PROBE_XO: the crossover form (MlaDecodeParams::crossover = 2) at the shapes with head-block pairs
  const bool xo = std::getenv("GLM5_PROBE_XO") != nullptr;
  std::printf("operands: %s%s\n", f16 ? "fp16" : "bf16", xo ? ", crossover where the head blocks pair up" : "");
  const LatentLayout l = make_latent_layout(512, 64, true);
  const int rows = 495000, topk = 2048;
  uint8_t* pool;
  CUDA_CHECK(cudaMalloc(&pool, size_t(rows) * l.row_bytes));
  {
    std::vector<uint8_t> h(size_t(rows) * l.row_bytes);
    std::mt19937 g(1);
    for (size_t i = 0; i < h.size(); ++i) h[i] = uint8_t(g()) & 0x77;
    for (int r = 0; r < rows; ++r) {
      for (int k = 0; k < 4; ++k) {
        const float one = 0.01f;
        std::memcpy(&h[size_t(r) * l.row_bytes + 512 + 4 * k], &one, 4);
      }
      for (int k = 0; k < 64; ++k) {  // the rope: bf16 in [-1, 1] (random bytes overflow fp16 in the fp16 form)
        const uint16_t b16 = float_to_bf16_bits(float(int(g() % 2001) - 1000) / 1000.f);
        std::memcpy(&h[size_t(r) * l.row_bytes + l.rope_offset() + 2 * k], &b16, 2);
      }
    }
    CUDA_CHECK(cudaMemcpy(pool, h.data(), h.size(), cudaMemcpyHostToDevice));
  }
  struct Shape { int B, H; };
  for (Shape sh : {Shape{64, 64}, Shape{128, 64}, Shape{128, 128}, Shape{64, 256}}) {
    const int B = sh.B, H = sh.H;
    std::vector<float> hq(size_t(B) * H * 576);
    std::vector<int32_t> hi(size_t(B) * topk);
    std::mt19937 g(B * 1000 + H);
    std::normal_distribution<float> nd;
    for (float& x : hq) x = nd(g);
    for (int32_t& x : hi) x = int32_t(g() % rows);
    float *q, *out, *lse, *ws;
    int32_t* idx;
    CUDA_CHECK(cudaMalloc(&q, hq.size() * 4));
    CUDA_CHECK(cudaMalloc(&idx, hi.size() * 4));
    CUDA_CHECK(cudaMalloc(&out, size_t(B) * H * 512 * 4));
    CUDA_CHECK(cudaMalloc(&lse, size_t(B) * H * 4));
    const size_t wsb = std::max<size_t>(mla_decode_workspace_bytes(B, H, topk, 512), 16);
    CUDA_CHECK(cudaMalloc(&ws, wsb));
    CUDA_CHECK(cudaMemcpy(q, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(idx, hi.data(), hi.size() * 4, cudaMemcpyHostToDevice));
    MlaDecodeParams p;
    p.q_latent = q;  // latent part only is read from here; rope below (same buffer, any values)
    p.q_rope = q;
    p.q_rope_row_stride = H * 64;
    p.q_rope_head_stride = 64;
    p.kv = pool;
    p.layout = l;
    p.indices = idx;
    p.out = out;
    p.lse = lse;
    p.B = B;
    p.H = H;
    p.topk = topk;
    p.scale = 0.04f;
    p.workspace = ws;
    p.workspace_bytes = wsb;
    p.crossover = xo && H % 128 == 0 ? 2 : 0;
    int chunk = topk;
    const int S = mla_decode_wgmma_splits(mla_decode_num_splits(B, H, topk), topk, &chunk);
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int it = 0; it < 12; ++it) {
      if (it == 11) {
        unsigned long long zero[32] = {};
        CUDA_CHECK(cudaMemcpyToSymbol(mla_wg::g_probe, zero, sizeof(zero)));
      }
      CUDA_CHECK(cudaEventRecord(e0));
      mla_decode_wgmma_launch(p, S, chunk, f16, nullptr);
      CUDA_CHECK(cudaEventRecord(e1));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (it >= 1 && it < 11) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    unsigned long long pr[32];
    CUDA_CHECK(cudaMemcpyFromSymbol(pr, mla_wg::g_probe, sizeof(pr)));
    const double ctas = double((H + 63) / 64) * B * S, tiles = double((H + 63) / 64) * B * topk / 64;
    std::printf("B=%d H=%d S=%d chunk=%d%s: kernel %.1f us (%s), %d CTAs, %.1f tiles/CTA\n", B, H, S, chunk,
                mla_decode_wgmma_crossover(p, S) ? " crossover" : "", 1e3 * ms[ms.size() / 2], mla_decode_wgmma_merges_in_cluster(S) ? "merged in its cluster" : "no combine",
                int(ctas), tiles / ctas);
    std::printf("  prologue (Q) %.0f cyc/CTA (x3 WGs)\n", pr[0] / ctas / 3);
    // Since session 34 the consumers' "P . V" phases are cut in two: the P . V (7, 13) and the buffer's release (5, 11).
    std::printf("  WG0 per tile: wait full %.0f | (FP8) wait rest %.0f | QK %.0f | softmax %.0f | wait S_free %.0f | P + PV %.0f "
                "(release %.0f)\n",
                pr[1] / tiles, pr[6] / tiles, pr[2] / tiles, pr[3] / tiles, pr[4] / tiles, (pr[7] + pr[5]) / tiles,
                pr[5] / tiles);
    std::printf("  WG1 per tile: wait P %.0f | PV %.0f (release %.0f) | (FP8) issue codes %.0f\n", pr[10] / tiles,
                (pr[13] + pr[11]) / tiles, pr[11] / tiles, pr[12] / tiles);
    // Register feed (BF16 rows): 20 issue loads, 21 wait empty, 22 latency + dequantize + store.
    // Bulk feed (FP8 rows, produce_fp8_bulk): 21 indices and scales, 26 wait for the codes, 22 then for the buffer
    // (S29; the two together until S28), 24 round-2
    // reads + round 1, 25 the raw-read barrier, 23 round 2's stores (until S8a, 21 was wait empty + issue).
    std::printf("  producer per tile: [20] %.0f | [21] %.0f | [26] %.0f | [22] %.0f | [24] %.0f | [25] %.0f | [23] %.0f\n",
                pr[20] / tiles, pr[21] / tiles, pr[26] / tiles, pr[22] / tiles, pr[24] / tiles, pr[25] / tiles,
                pr[23] / tiles);
    {  // agreement with the mma.sync kernel (catches a variant's gross errors: races, lost rows; not a test)
      float* ref;
      const size_t n_out = size_t(B) * H * 512;
      CUDA_CHECK(cudaMalloc(&ref, n_out * 4));
      mla_decode_wgmma_launch(p, 1, topk, f16, nullptr);  // unsplit: straight into out
      MlaDecodeParams pt = p;
      pt.out = ref;
      pt.lse = nullptr;
      pt.kernel = MlaDecodeKernel::TensorCore;
      mla_decode_cuda(pt, nullptr);
      std::vector<float> a(n_out), r(n_out);
      CUDA_CHECK(cudaMemcpy(a.data(), out, n_out * 4, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(r.data(), ref, n_out * 4, cudaMemcpyDeviceToHost));
      double md = 0, mr = 0;
      for (size_t i = 0; i < n_out; ++i) md = std::max(md, double(std::fabs(a[i] - r[i]))), mr = std::max(mr, double(std::fabs(r[i])));
      std::printf("  check: max |wgmma - mma.sync| = %.2e, max |mma.sync| = %.2e, out[0] %.4e / %.4e\n", md, mr, a[0], r[0]);
      cudaFree(ref);
    }
    cudaFree(q), cudaFree(idx), cudaFree(out), cudaFree(lse), cudaFree(ws);
  }
  return 0;
}
