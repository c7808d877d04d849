// CUDA-event timing of a launch with a cold L2: the one timer the kernel benchmark (`bench kernels`), the
// GPU tests that print bandwidths and the diagnostic probes share.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "common/buffer.h"
#include "common/error.h"

namespace glm5 {

// Times `launch` on `stream`: `warmup` untimed launches, then `reps` launches each preceded by a memset of a
// flush buffer (outside the events; kFlushBytes = 256 MiB, over 5x the H200's 50 MB L2, so no launch finds
// its inputs in L2). time() returns the sorted times in microseconds; median_us() their median.
// Throws glm5::Error (CUDA_CHECK) when a CUDA call fails.
class ColdTimer {
 public:
  static constexpr size_t kFlushBytes = size_t(256) << 20;

  ColdTimer(cudaStream_t stream, int warmup, int reps) : stream_(stream), warmup_(warmup), reps_(reps) {
    flush_ = Buffer(Where::Device, kFlushBytes, "L2 flush buffer");
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~ColdTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  ColdTimer(const ColdTimer&) = delete;
  ColdTimer& operator=(const ColdTimer&) = delete;

  std::vector<double> time(const std::function<void()>& launch) {
    for (int i = 0; i < warmup_; ++i) launch();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> us;
    for (int r = 0; r < reps_; ++r) {
      CUDA_CHECK(cudaMemsetAsync(flush_.data(), r & 0xff, kFlushBytes, stream_));
      CUDA_CHECK(cudaEventRecord(start_, stream_));
      launch();
      CUDA_CHECK(cudaEventRecord(stop_, stream_));
      CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      us.push_back(1000.0 * ms);
    }
    std::sort(us.begin(), us.end());
    return us;
  }
  // The median of time(launch): the middle time, or the mean of the two middle ones for an even `reps`.
  double median_us(const std::function<void()>& launch) {
    const std::vector<double> t = time(launch);
    const size_t n = t.size();
    return n == 0 ? 0.0 : n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  }

 private:
  cudaStream_t stream_;
  int warmup_, reps_;
  Buffer flush_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace glm5
