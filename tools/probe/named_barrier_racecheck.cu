// Does compute-sanitizer racecheck model named barriers with a thread count below the CTA's? S7a's racecheck of the
// wgmma MLA kernel reported hazards only across its 256-thread named-barrier hand-offs (S_ready / S_free and the
// two-sided epilogue barrier). This probe runs the same patterns on a 384-thread CTA with nothing else in it:
//   mode 0: warpgroup 1 writes, barrier.arrive(1, 256); warpgroup 0 barrier.sync(1, 256), reads   (ordered)
//   mode 1: both warpgroups barrier.sync(2, 256) between the write and the read                 (ordered)
//   mode 2: no barrier                                                                           (a real race)
//   mode 3: the MLA kernel's consumer skeleton over 4 tiles: WG0 [i > 0: sync S_free(2)] writes alpha, arrives
//           S_ready(1), syncs P_written(5, 128: WG0 only); WG1 syncs S_ready, reads alpha, [i + 1 < n: arrives
//           S_free]; then WG0 writes the stats, both sync Epilogue(3), WG1 reads them                (ordered)
//   mode 4: mode 3 without the WG0-only P_written barrier                                         (ordered)
// Run: named_barrier_racecheck MODE under `compute-sanitizer --tool racecheck`; a tool that models the barriers
// reports hazards for mode 2 only. Build: nvcc -arch=sm_90 -I. tools/probe/named_barrier_racecheck.cu
#include <cstdio>
#include <cstdlib>

#include "kernels/wgmma.cuh"

__global__ void handoff(int mode, int* out) {
  __shared__ int buf[128];
  __shared__ int stats[128];
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 2) return;  // a third warpgroup outside the barriers, as the MLA kernel's producers are
  if (mode >= 3) {
    constexpr int n = 4;
    int acc = 0;
    for (int i = 0; i < n; ++i) {
      if (wg == 0) {
        if (i > 0) glm5::wgmma::bar_sync(2, 256);
        if ((t & 3) == 0) buf[t] = 7 * t + 1 + i;  // a quarter of the lanes write, as in the kernel
        glm5::wgmma::bar_arrive(1, 256);
        if (mode == 3) glm5::wgmma::bar_sync(5, 128);
      } else {
        glm5::wgmma::bar_sync(1, 256);
        acc += buf[t & ~3] - i;
        if (i + 1 < n) glm5::wgmma::bar_arrive(2, 256);
      }
    }
    if (wg == 0) {
      if ((t & 3) == 0) stats[t] = 3 * t;
      glm5::wgmma::bar_sync(3, 256);
    } else {
      glm5::wgmma::bar_sync(3, 256);
      out[t] = acc / n + stats[t & ~3] - 3 * (t & ~3);  // = 7 (t & ~3) + 1
    }
    return;
  }
  if (wg == 1) {
    buf[t] = 7 * t + 1;
    if (mode == 0) glm5::wgmma::bar_arrive(1, 256);
    if (mode == 1) glm5::wgmma::bar_sync(2, 256);
  } else {
    if (mode == 0) glm5::wgmma::bar_sync(1, 256);
    if (mode == 1) glm5::wgmma::bar_sync(2, 256);
    out[t] = buf[127 - t];
  }
}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? std::atoi(argv[1]) : 0;
  int* out = nullptr;
  cudaMalloc(&out, 128 * sizeof(int));
  handoff<<<1, 384>>>(mode, out);
  int h[128];
  cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int t = 0; t < 128; ++t) bad += h[t] != (mode >= 3 ? 7 * (t & ~3) + 1 : 7 * (127 - t) + 1);
  std::printf("mode %d: %s (%d wrong)\n", mode, cudaGetLastError() == cudaSuccess ? "ran" : "failed", bad);
  cudaFree(out);
  return 0;
}
