// Chrome trace event format, Kineto flavour (what torch.profiler writes), for our Timeline.
// Written files open in Perfetto UI / chrome://tracing and HolisticTraceAnalysis reads them.
#pragma once
#include <string>

#include "trace/atomic_file.h"
#include "trace/timeline.h"

namespace glm5 {

// Writes `t` to `path` as {"schemaVersion": 1, "distributedInfo": {"rank": 0, ...}, "deviceProperties":
// [...], "baseTimeNanoseconds": N, "displayTimeUnit": "ms", "glm5prof": {...}, "traceEvents": [...]}, one
// event per line, distributedInfo on the first line (HolisticTraceAnalysis reads the rank from there;
// tools/hta_check.py checks its kernel breakdown against report.json). Events are "ph":"X" with ts/dur
// in microseconds (floats) relative to t.base_time_ns; categories kernel, cuda_runtime, cuda_driver,
// gpu_memcpy, gpu_memset, user_annotation, gpu_user_annotation, cpu_op; "ac2g" flows (s/f) link each
// runtime launch to its kernel by correlation id. pid = device for GPU events, the process id for host
// events; tid = stream / thread. Args: correlation, External id, stream, device, grid, block and ours:
// step, layer, op, bytes, flops. A gpu_user_annotation span per op range covers that op's kernels.
// `rank` / `world_size` go to distributedInfo (HTA maps one file per rank; `profile --tp N --rank R`
// passes R). Atomic (temp file + rename); with `outputs`, staged there and renamed by its commit() together with
// the run's other files. Throws glm5::Error naming the path if it cannot be written.
void write_chrome_trace(const Timeline& t, const std::string& path, int rank = 0, int world_size = 1,
                        AtomicOutputs* outputs = nullptr);

// Reads a Chrome/Kineto trace (ours or torch.profiler's; plain JSON or gzip, told apart by the gzip
// magic bytes, not the name) into a Timeline with source "file", streaming: the file is read in
// windows (inflated on the fly for gzip) and the traceEvents are parsed in batches (simdjson), so
// memory follows the events kept, not the file (measured ~140 MB/s on one core for plain JSON,
// reports/2026-11-29-trace-reader.md). Kernels keep our args (step/layer/op/bytes/flops/side_stream) when present;
// otherwise a kernel's op is the name of the innermost cpu_op with the same "External id" (e.g.
// "aten::copy_"), and its step comes from the enclosing ProfilerStep#N / step.N range. Throws
// glm5::Error on a missing file, bad JSON or a truncated / corrupt file, naming the path, the event
// index and field, and the byte offset where reading failed.
Timeline read_chrome_trace(const std::string& path);

// The longest plausible duration [us] in a trace or a report (~31 years): read_chrome_trace refuses a longer `dur`,
// the diff's report reader a longer time.
inline constexpr double kMaxPlausibleDurationUs = 1e15;

}  // namespace glm5
