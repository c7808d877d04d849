// Copies of CUPTI activity structs into the plain records of cupti_records.h, one function per struct,
// so each copy can be tested on a hand-built struct without a GPU (tests/profiler/test_cupti_parse.cpp).
// CuptiTracer::consume_buffer (cupti_parse.cpp) calls them for the records CUPTI hands back.
#pragma once
#include <cupti.h>

#include "profiler/cupti_records.h"

namespace glm5 {

// CUPTI_ACTIVITY_KIND_GRAPH_TRACE: CUDA 13's CUpti_ActivityGraphTrace2 {kind, correlationId, start,
// end, deviceId, graphId, contextId, streamId, reserved, endDeviceId, endContextId}. deviceId /
// endDeviceId INT_MAX ("the graph starts / ends on the host", cupti_activity.h) become -1; start = end
// = 0 (CUPTI could not time the launch) is kept as is for the Timeline builder to report.
GraphTraceRecord graph_trace_record(const CUpti_ActivityGraphTrace2& g);

}  // namespace glm5
