// CuptiTracer::consume_buffer: copies the fields we use out of CUPTI's activity records into the plain
// records of cupti_records.h (the only code that touches CUPTI record structs).
#include "profiler/cupti_parse.h"

#include <cupti.h>

#include <climits>

#include "profiler/cupti_tracer.h"

namespace glm5 {

namespace {

bool is_launch_name(const std::string& name) {
  return name.find("LaunchKernel") != std::string::npos ||
         name.find("LaunchCooperativeKernel") != std::string::npos;
}

std::string callback_name(bool driver, uint32_t cbid) {
  const char* name = nullptr;
  cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name);
  if (!name) return "cbid:" + std::to_string(cbid);
  std::string s = name;
  const size_t v = s.rfind("_v");  // cudaLaunchKernel_v7000 -> cudaLaunchKernel
  return v == std::string::npos || v == 0 ? s : s.substr(0, v);
}

std::string memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    default: return "Memcpy";
  }
}

// The fields CUpti_ActivityMemcpy6 and CUpti_ActivityMemset4 share.
template <class CuptiCopy>
MemcpyRecord copy_record(const CuptiCopy& m, std::string name, bool is_memset) {
  MemcpyRecord x;
  x.is_memset = is_memset;
  x.name = std::move(name);
  x.start_ns = static_cast<int64_t>(m.start);
  x.end_ns = static_cast<int64_t>(m.end);
  x.device = static_cast<int>(m.deviceId);
  x.stream = m.streamId;
  x.correlation_id = m.correlationId;
  x.bytes = m.bytes;
  x.graph_node_id = m.graphNodeId;
  x.graph_id = m.graphId;
  return x;
}

}  // namespace

GraphTraceRecord graph_trace_record(const CUpti_ActivityGraphTrace2& g) {
  GraphTraceRecord x;
  x.correlation_id = g.correlationId;
  x.start_ns = static_cast<int64_t>(g.start);
  x.end_ns = static_cast<int64_t>(g.end);
  x.device = g.deviceId == uint32_t(INT_MAX) ? -1 : static_cast<int>(g.deviceId);
  x.end_device = g.endDeviceId == uint32_t(INT_MAX) ? -1 : static_cast<int>(g.endDeviceId);
  x.stream = g.streamId;
  x.graph_id = g.graphId;
  return x;
}

void CuptiTracer::consume_buffer(uint8_t* buffer, size_t valid_size) {
  ActivityRecords got;
  CUpti_Activity* record = nullptr;
  for (;;) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != CUPTI_SUCCESS) {
      got.errors.push_back("cuptiActivityGetNextRecord: error " + std::to_string(static_cast<int>(r)));
      break;
    }
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        KernelRecord x;
        x.name = k->name ? k->name : "(unnamed kernel)";
        x.start_ns = static_cast<int64_t>(k->start);
        x.end_ns = static_cast<int64_t>(k->end);
        x.device = static_cast<int>(k->deviceId);
        x.stream = k->streamId;
        x.correlation_id = k->correlationId;
        x.grid = {k->gridX, k->gridY, k->gridZ};
        x.block = {k->blockX, k->blockY, k->blockZ};
        x.graph_node_id = k->graphNodeId;
        x.graph_id = k->graphId;
        got.kernels.push_back(std::move(x));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        got.copies.push_back(copy_record(*m, memcpy_name(m->copyKind), false));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        got.copies.push_back(copy_record(*m, "Memset", true));
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        ApiRecord x;
        x.is_driver = record->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        x.name = callback_name(x.is_driver, a->cbid);
        x.is_kernel_launch = is_launch_name(x.name);
        x.start_ns = static_cast<int64_t>(a->start);
        x.end_ns = static_cast<int64_t>(a->end);
        x.process = a->processId;
        x.thread = a->threadId;
        x.correlation_id = a->correlationId;
        got.api_calls.push_back(std::move(x));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MARKER: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(record);
        const bool start = m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START;
        const bool end = m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END;
        if (!start && !end) break;  // instantaneous markers: not ranges
        MarkerRecord x;
        x.id = m->id;
        x.is_start = start;
        x.name = m->name ? m->name : "";
        x.timestamp_ns = static_cast<int64_t>(m->timestamp);
        x.thread = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
        got.markers.push_back(std::move(x));
        break;
      }
      case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
        got.graph_traces.push_back(graph_trace_record(*reinterpret_cast<const CUpti_ActivityGraphTrace2*>(record)));
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (e->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) break;
        got.external.push_back({e->correlationId, e->externalId});
        break;
      }
      default:
        break;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto append = [](auto& to, auto& from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  append(records_.kernels, got.kernels);
  append(records_.copies, got.copies);
  append(records_.api_calls, got.api_calls);
  append(records_.markers, got.markers);
  append(records_.external, got.external);
  append(records_.graph_traces, got.graph_traces);
  for (std::string& e : got.errors) {
    errors_.push_back(e);
    records_.errors.push_back(std::move(e));
  }
}

}  // namespace glm5
