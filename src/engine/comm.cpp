#include "engine/comm.h"

#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "trace/atomic_file.h"

namespace glm5 {

namespace {

class SimulatedCommunicator : public Communicator {
 public:
  SimulatedCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "simulated"; }
  void all_reduce_sum(float*, size_t, cudaStream_t) override {}

 private:
  int rank_, size_;
};

// Shared state of the host ranks: a two-phase barrier around a shared accumulator.
struct HostGroup {
  explicit HostGroup(int n) : size(n) {}
  const int size;
  std::mutex m;
  std::condition_variable cv;
  std::vector<double> sum;
  int arrived = 0, departed = 0;
  uint64_t generation = 0;
};

class HostCommunicator : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  std::string kind() const override { return "host"; }
  void all_reduce_sum(float* data, size_t n, cudaStream_t) override {
    std::unique_lock<std::mutex> lock(g_->m);
    // Wait until the previous collective has been fully read by every rank.
    g_->cv.wait(lock, [&] { return g_->departed == 0; });
    if (g_->arrived == 0) g_->sum.assign(n, 0.0);
    require(g_->sum.size() == n, "host all-reduce: ranks disagree on the element count");
    for (size_t i = 0; i < n; ++i) g_->sum[i] += data[i];
    const uint64_t gen = g_->generation;
    if (++g_->arrived == g_->size) {
      g_->arrived = 0;
      g_->departed = g_->size;
      ++g_->generation;
      g_->cv.notify_all();
    } else {
      g_->cv.wait(lock, [&] { return g_->generation != gen; });
    }
    for (size_t i = 0; i < n; ++i) data[i] = float(g_->sum[i]);
    if (--g_->departed == 0) g_->cv.notify_all();
  }

 private:
  std::shared_ptr<HostGroup> g_;
  int rank_;
};

// The NCCL entry points glm5prof uses, resolved from the shared library at run time.
struct NcclApi {
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_all)(ncclComm_t*, int, const int*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;
};

const NcclApi& nccl() {
  // Loaded once per process: dlopen's own handle is process-wide state in any case.
  static const NcclApi api = [] {
    setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast must stay off on shared hosts
    std::vector<std::string> tried;
    const char* env = std::getenv("GLM5_NCCL_LIB");
    std::vector<std::string> names;
    if (env && *env) names.push_back(env);
    names.insert(names.end(), {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2",
                               "/usr/local/cuda/lib/libnccl.so.2"});
    void* h = nullptr;
    for (const std::string& n : names) {
      h = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (h) break;
      tried.push_back(n);
    }
    std::string list;
    for (const std::string& t : tried) list += (list.empty() ? "" : ", ") + t;
    require(h != nullptr, "NCCL not found (tried " + list + "); set GLM5_NCCL_LIB to libnccl.so.2");
    NcclApi a;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      require(fn != nullptr, std::string("NCCL library lacks ") + name);
    };
    sym(a.get_unique_id, "ncclGetUniqueId");
    sym(a.comm_init_all, "ncclCommInitAll");
    sym(a.comm_init_rank, "ncclCommInitRank");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.comm_destroy, "ncclCommDestroy");
    sym(a.error_string, "ncclGetErrorString");
    return a;
  }();
  return api;
}

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(std::string("NCCL ") + what + " failed: " + nccl().error_string(r));
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t c, int rank, int size) : c_(c), rank_(rank), size_(size) {}
  ~NcclCommunicator() override { nccl().comm_destroy(c_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "nccl"; }
  void all_reduce_sum(float* data, size_t n, cudaStream_t stream) override {
    nccl_check(nccl().all_reduce(data, data, n, ncclFloat32, ncclSum, c_, stream), "all-reduce");
  }

 private:
  ncclComm_t c_;
  int rank_, size_;
};

}  // namespace

std::unique_ptr<Communicator> make_simulated_communicator(int rank, int size) {
  require(size >= 1 && rank >= 0 && rank < size, "--rank " + std::to_string(rank) + " must be in [0, --tp " +
                                                     std::to_string(size) + ")");
  return std::make_unique<SimulatedCommunicator>(rank, size);
}

std::vector<std::unique_ptr<Communicator>> make_host_communicators(int size) {
  require(size >= 1, "host communicators: size must be positive");
  auto g = std::make_shared<HostGroup>(size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<HostCommunicator>(g, r));
  return out;
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int size) {
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  require(size <= devices, "--tp " + std::to_string(size) + " needs " + std::to_string(size) + " GPUs, this host has " +
                               std::to_string(devices));
  std::vector<ncclComm_t> comms(size);
  std::vector<int> devs(size);
  for (int i = 0; i < size; ++i) devs[i] = i;
  nccl_check(nccl().comm_init_all(comms.data(), size, devs.data()), "ncclCommInitAll");
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<NcclCommunicator>(comms[r], r, size));
  return out;
}

std::unique_ptr<Communicator> make_nccl_communicator_from_file(const std::string& id_file, int size, int rank,
                                                               double timeout_s) {
  require(size >= 1 && rank >= 0 && rank < size, "NCCL rendezvous: rank must be in [0, size)");
  ncclUniqueId id;
  if (rank == 0) {
    nccl_check(nccl().get_unique_id(&id), "ncclGetUniqueId");
    write_file_atomic(id_file, std::string(id.internal, sizeof id.internal));
  } else {
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      std::ifstream f(id_file, std::ios::binary);
      if (f && f.read(id.internal, sizeof id.internal) && f.gcount() == sizeof id.internal) break;
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      require(waited < timeout_s, "NCCL rendezvous: no id in '" + id_file + "' after " + std::to_string(int(waited)) +
                                      " s (is rank 0 running and is the file shared?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ncclComm_t c;
  nccl_check(nccl().comm_init_rank(&c, size, id, rank), "ncclCommInitRank");
  return std::make_unique<NcclCommunicator>(c, rank, size);
}

}  // namespace glm5
