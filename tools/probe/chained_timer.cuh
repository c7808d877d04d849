// Timing helpers shared by the diagnostic probes in tools/probe (not the benchmark's Timer: no L2 flush,
// on purpose: they measure back-to-back launches as the decode step issues them).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace glm5::probe {

// Microseconds per call of `launch(i)` for i = 0 .. reps - 1 issued back to back on the default stream
// (PDL-chained when the launches carry the attribute), after `warm` untimed calls; CUDA events.
template <typename F>
float chained_us(F launch, int reps, int warm = 1) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warm; ++i) launch(i);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) launch(i);
  CUDA_CHECK(cudaEventRecord(b));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return 1000.f * ms / reps;
}

// Median microseconds of `reps` calls of `launch()`, each timed alone between two events; `prepare(i)` (untimed,
// e.g. an L2 flush) is issued before call i's first event.
template <typename F, typename P = void (*)(int)>
float single_us(F launch, int reps, P prepare = [](int) {}) {
  std::vector<float> t;
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    prepare(i);
    CUDA_CHECK(cudaEventRecord(a));
    launch();
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1000.f * ms);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace glm5::probe
