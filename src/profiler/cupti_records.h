// Plain copies of the CUPTI activity records the profiler uses, and the one function that turns them
// into a Timeline. The CUPTI callback code only copies fields out of CUPTI's structs into these; all
// attribution logic lives in build_timeline_from_records(), which tests call with synthetic records
// (no GPU, no CUPTI).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/timeline.h"

namespace glm5 {

struct KernelRecord {            // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
  std::string name;              // as CUPTI reports it (mangled for C++ kernels)
  int64_t start_ns = 0, end_ns = 0;
  int device = 0;
  int64_t stream = 0;
  uint64_t correlation_id = 0;
  Dim3 grid, block;
  uint64_t graph_node_id = 0;    // 0 unless replayed from a CUDA graph
};

struct MemcpyRecord {            // CUPTI_ACTIVITY_KIND_MEMCPY / MEMSET
  bool is_memset = false;
  std::string name;              // "Memcpy HtoD", "Memset", ...
  int64_t start_ns = 0, end_ns = 0;
  int device = 0;
  int64_t stream = 0;
  uint64_t correlation_id = 0;
  uint64_t bytes = 0;
};

struct ApiRecord {               // CUPTI_ACTIVITY_KIND_RUNTIME / DRIVER
  bool is_driver = false;
  std::string name;              // "cudaLaunchKernel", "cuLaunchKernel", ... (or "cbid:N")
  bool is_kernel_launch = false; // the call launches a kernel (counts kernels_launched)
  int64_t start_ns = 0, end_ns = 0;
  int64_t process = 0, thread = 0;
  uint64_t correlation_id = 0;
};

struct MarkerRecord {            // CUPTI_ACTIVITY_KIND_MARKER: an NVTX push (start) or pop (end)
  uint32_t id = 0;               // pairs a start with its end
  bool is_start = true;
  std::string name;              // on the start record only
  int64_t timestamp_ns = 0;
  int64_t thread = 0;            // objectId.pt.threadId
};

struct ExternalCorrelationRecord {  // CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
  uint64_t correlation_id = 0;   // CUPTI correlation id of the API call made while the id was pushed
  uint64_t external_id = 0;      // the id our begin_op pushed
};

struct ActivityRecords {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> copies;
  std::vector<ApiRecord> api_calls;
  std::vector<MarkerRecord> markers;
  std::vector<ExternalCorrelationRecord> external;
  uint64_t dropped = 0;
  std::vector<std::string> errors;  // CUPTI errors met while recording (timeline flagged incomplete)
};

// Builds the Timeline (source "cupti"): kernels / copies joined correlation id -> external id ->
// `ops` so each gets step, layer, op, bytes and flops; runtime/driver calls as activities; marker
// start/end pairs (by id) as user_annotation Ranges with nesting; one gpu_user_annotation Range per
// op covering its kernels. Unmatched marker starts are closed at the last timestamp seen (message kept).
// base_time_ns = earliest timestamp. Never throws on inconsistent records: it notes them in messages.
Timeline build_timeline_from_records(const ActivityRecords& records,
                                     const std::map<uint64_t, OpDesc>& ops);

// Demangles a C++ symbol (abi::__cxa_demangle); returns `name` unchanged if it is not mangled.
std::string demangle(const std::string& name);

}  // namespace glm5
