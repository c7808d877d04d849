// Collectives for tensor / expert parallelism (--tp N). The engine only needs an in-place sum over
// ranks of its partial outputs (row-parallel o_proj and MLP down projections, expert-parallel MoE).
//   NCCL:      N GPUs of one host, one thread per GPU (ncclCommInitAll), or one process per GPU /
//              several hosts with the unique id exchanged through a shared file (ncclCommInitRank).
//              NCCL is loaded at run time (dlopen): one-GPU runs never need it.
//   host:      the CPU backend's ranks, threads of one process summing through shared memory.
//   simulated: `--tp N --rank R` on one GPU: one rank's shard, the collective is a marked no-op.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace glm5 {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string kind() const = 0;  // "nccl" | "host" | "simulated"
  // In place: data[i] = sum over ranks of data[i], i < n. Host pointer for "host", device pointer
  // (on this rank's GPU, ordered on `stream`) for "nccl". Throws glm5::Error on failure.
  virtual void all_reduce_sum(float* data, size_t n, cudaStream_t stream) = 0;
};

// One rank of `size` whose collectives are not performed (single-GPU shard simulation).
std::unique_ptr<Communicator> make_simulated_communicator(int rank, int size);

// `size` communicators for `size` threads of this process (CPU backend): each thread calls
// all_reduce_sum on its own one; the calls meet at a barrier.
std::vector<std::unique_ptr<Communicator>> make_host_communicators(int size);

// One NCCL communicator per device 0 .. size-1 of this process (ncclCommInitAll). Sets
// NCCL_NVLS_ENABLE=0 unless already set (NVLink multicast stays off). Throws glm5::Error if NCCL
// cannot be loaded (names the library paths tried; $GLM5_NCCL_LIB overrides) or fails.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int size);

// Multi-process / multi-host: rank 0 writes a fresh NCCL unique id to `id_file` (atomically), the
// others wait for it (up to `timeout_s`, then a clear error; never hang), then ncclCommInitRank on
// the current device. `id_file` must be on storage every rank sees (or copied there).
std::unique_ptr<Communicator> make_nccl_communicator_from_file(const std::string& id_file, int size, int rank,
                                                               double timeout_s = 300);

}  // namespace glm5
