#include "engine/profile_session.h"

#include <algorithm>
#include <barrier>
#include <mutex>
#include <optional>
#include <thread>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/buffer.h"
#include "common/error.h"
#include "common/input_file.h"
#include "common/rng.h"
#include "engine/comm.h"
#include "engine/decode_engine.h"
#include "engine/step_floor.h"
#include "model/config.h"
#include "model/weights.h"
#include "profiler/cupti_records.h"
#include "profiler/cupti_tracer.h"
#include "profiler/host_clock_tracer.h"
#include "profiler/nvtx_tracer.h"
#include "report/report.h"
#include "trace/atomic_file.h"
#include "trace/chrome_trace.h"

namespace glm5 {

namespace {

using json = nlohmann::json;

// Device-to-device copy bandwidth [GB/s, bytes read + written], measured now: the roofline's memory
// ceiling (the brief measured ~4260 GB/s on the H200). 1 GiB copied 10 times after a warm-up copy.
double measure_copy_gbps(cudaStream_t stream) {
  const size_t n = size_t(1) << 30;
  Buffer a(Where::Device, n, "copy-bandwidth probe (source)"), b(Where::Device, n, "copy-bandwidth probe (target)");
  CUDA_CHECK(cudaMemsetAsync(a.data(), 1, n, stream));
  CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, stream));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  CUDA_CHECK(cudaEventRecord(e0, stream));
  for (int i = 0; i < 10; ++i) CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaEventRecord(e1, stream));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * 10 * double(n) / (double(ms) * 1e-3) / 1e9;
}

json device_json(bool cuda, const Peaks& peaks) {
  json d;
  if (!cuda) {
    d["backend"] = "cpu";
    d["name"] = "host CPU (reference backend: times are CPU times, not GPU times)";
    return d;
  }
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  d["backend"] = "cuda";
  d["name"] = p.name;
  d["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  d["sms"] = p.multiProcessorCount;
  d["memory_bytes"] = p.totalGlobalMem;
  d["driver_version"] = driver;
  d["runtime_version"] = runtime;
  d["copy_gbps_measured"] = peaks.copy_gbps;
  d["bf16_tflops"] = peaks.bf16_tflops;
  d["bf16_tflops_source"] = "dense BF16 matmul ceiling measured on the H200 (project brief); not re-measured per run";
  return d;
}

json model_json(const ModelConfig& c) {
  return json{{"name", c.name},
              {"layers", c.num_hidden_layers},
              {"dense_layers", c.num_hidden_layers - c.num_moe_layers()},
              {"moe_layers", c.num_moe_layers()},
              {"hidden_size", c.hidden_size},
              {"heads", c.num_attention_heads},
              {"kv_lora_rank", c.kv_lora_rank},
              {"qk_rope_head_dim", c.qk_rope_head_dim},
              {"index_topk", c.index_topk},
              {"experts", c.n_routed_experts},
              {"experts_per_token", c.num_experts_per_tok},
              {"parameters", c.parameter_count()}};
}

// Concatenates per-path timelines into one (they ran one after another on the same clock);
// external correlation ids are offset so they stay unique.
Timeline merge_timelines(const std::vector<Timeline>& parts) {
  Timeline m;
  uint64_t offset = 0;
  bool first = true;
  for (const Timeline& t : parts) {
    uint64_t max_id = 0;
    for (Activity a : t.activities) {
      if (a.external_id) a.external_id += offset;
      max_id = std::max(max_id, a.external_id);
      m.activities.push_back(std::move(a));
    }
    for (const auto& [id, op] : t.ops) {
      m.ops[id + offset] = op;
      max_id = std::max(max_id, id + offset);
    }
    m.ranges.insert(m.ranges.end(), t.ranges.begin(), t.ranges.end());
    m.base_time_ns = first ? t.base_time_ns : std::min(m.base_time_ns, t.base_time_ns);
    first = false;
    m.source = t.source;
    if (m.devices.empty()) m.devices = t.devices;
    m.records_dropped += t.records_dropped;
    m.kernels_launched += t.kernels_launched;
    m.kernels_recorded += t.kernels_recorded;
    m.graph_kernels += t.graph_kernels;
    m.complete = m.complete && t.complete;
    m.messages.insert(m.messages.end(), t.messages.begin(), t.messages.end());
    offset = max_id + 1;
  }
  sort_timeline(m);
  return m;
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / double(1ull << 30));
  return b;
}

// Serializes the engine ranks' calls into one tracer (CUPTI is process-wide; NVTX ranges and external
// correlation ids stay per thread, as CUPTI and NVTX keep them).
class LockedTracer : public OpTracer {
 public:
  explicit LockedTracer(OpTracer& t) : t_(t) {}
  void begin_range(const std::string& name) override { std::lock_guard<std::mutex> l(m_); t_.begin_range(name); }
  void end_range() override { std::lock_guard<std::mutex> l(m_); t_.end_range(); }
  void begin_op(const OpDesc& op) override { std::lock_guard<std::mutex> l(m_); t_.begin_op(op); }
  void end_op() override { std::lock_guard<std::mutex> l(m_); t_.end_op(); }
  void begin_graph_launch(int step, const CapturedGraph& g) override {
    std::lock_guard<std::mutex> l(m_);
    t_.begin_graph_launch(step, g);
  }
  void end_graph_launch() override { std::lock_guard<std::mutex> l(m_); t_.end_graph_launch(); }
  void begin_graph_capture() override { std::lock_guard<std::mutex> l(m_); t_.begin_graph_capture(); }
  void end_graph_capture() override { std::lock_guard<std::mutex> l(m_); t_.end_graph_capture(); }

 private:
  OpTracer& t_;
  std::mutex m_;
};

// The activities of one GPU (a rank of a multi-GPU run), for a per-rank analysis.
Timeline device_part(const Timeline& t, int device) {
  Timeline p = t;
  p.activities.clear();
  for (const Activity& a : t.activities)
    if (a.device == device) p.activities.push_back(a);
  return p;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Step times of one rank measured by the engine itself (DecodeEngine::last_step_us: CUDA events
// around the step's device work, no profiler involved): untraced steps before the tracer attaches,
// then the traced steps.
struct RankTiming {
  std::vector<double> untraced_us, traced_us;
  double traced_first_us = 0;  // the first traced step (left out of traced_us)
  // --graph-trace graph: traced_us are graph-level steps; then one left-out re-capture step at node
  // level and the node-level attribution steps (engine events), and CUPTI's own per-launch device
  // times of the graph-level steps (graph.step.N records, step -> us).
  bool graph_level = false;
  std::string graph_trace = "none";  // "none" without --graph, else the level the steps ran at
  double attribution_first_us = 0;
  std::vector<double> attribution_us;
  std::vector<double> graph_record_us;
};

nlohmann::json timing_json(const RankTiming& r, bool cuda) {
  const double u = median_of(r.untraced_us), t = median_of(r.traced_us);
  nlohmann::json j{{"graph_trace", r.graph_trace},
                   {"untraced_steps", r.untraced_us.size()},
                   {"untraced_samples_us", r.untraced_us},
                   {"traced_samples_us", r.traced_us},
                   {"untraced_step_us", u},
                   {"traced_step_us", t},
                   {"traced_first_step_us", r.traced_first_us},
                   {"method", cuda ? "CUDA events on the engine stream around each step's device work, same process; "
                                     "untraced steps run before CUPTI is enabled; the first traced step (CUPTI's one-time costs) is left out "
                                     "of traced_step_us"
                                   : "host wall time of each step's ops, same process"}};
  if (u > 0 && !r.untraced_us.empty()) {
    j["overhead_pct"] = 100.0 * (t / u - 1.0);
    if (cuda) {  // issue 4's limit on CUPTI's overhead (host-clock timings on a shared CPU are noise)
      j["limit_pct"] = 2.0;
      j["within_limit"] = 100.0 * (t / u - 1.0) <= 2.0;
    }
  } else {
    j["overhead_pct"] = nullptr;
  }
  if (r.graph_level) {
    // Graph-level tracing: the steps above ran with one CUPTI record per graph launch; the per-op
    // analysis and the kernels in the trace come from these node-level steps, timed on their own.
    const double a = median_of(r.attribution_us);
    j["method"] = j["method"].get<std::string>() +
                  "; --graph-trace graph: the traced steps record one CUPTI graph-level record per replay "
                  "(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, no per-kernel records); after them the graph is re-captured, "
                  "one step is left out and attribution_steps steps run at node level (a kernel record per graph "
                  "node): their kernels make the per-op analysis and the trace";
    j["attribution_steps"] = r.attribution_us.size();
    j["attribution_samples_us"] = r.attribution_us;
    j["attribution_step_us"] = a;
    j["attribution_first_step_us"] = r.attribution_first_us;
    j["attribution_overhead_pct"] = u > 0 && !r.untraced_us.empty() && a > 0 ? nlohmann::json(100.0 * (a / u - 1.0))
                                                                              : nlohmann::json(nullptr);
    j["graph_record_samples_us"] = r.graph_record_us;
    j["graph_record_step_us"] = median_of(r.graph_record_us);
  }
  return j;
}

// What report.json / report.md / stderr say when CUPTI could not be used on the CUDA backend.
constexpr const char* kHostClockFallback =
    "CUPTI unavailable: fell back to the host clock (each op timed on the host around a device synchronize; "
    "no per-kernel records, launch overhead included)";

// Runs every rank's engine (one thread per rank, GPU r for rank r) through warm-up untraced, then
// `o.untraced_steps` measured steps untraced (timed by the engine's CUDA events only), then the
// measured steps traced into one Timeline (CUPTI on the GPU, the host clock on the CPU). With
// --graph the step graph is captured again once CUPTI is attached (a graph captured before the
// profiler attached is not relied on to be traced), so the first traced step captures it. With
// --graph-trace graph the measured steps are traced at graph level, then CUPTI switches to node
// level (device idle, all ranks at a barrier), the graph is captured again in one left-out step and
// the attribution steps run (ProfileOptions::graph_trace).
Timeline run_ranks(const ModelConfig& cfg, const std::vector<Weights>& weights, const EngineOptions& eo,
                   const std::vector<std::unique_ptr<Communicator>>& comms, bool cuda, int context,
                   const ProfileOptions& o, std::vector<RankTiming>* timing) {
  const int ranks = int(weights.size());
  int home_device = 0;  // the device the caller chose (a one-process-per-rank run picks its own)
  if (cuda) CUDA_CHECK(cudaGetDevice(&home_device));
  // --graph-trace graph (the default with --graph, see ProfileOptions::graph_trace): graph-level
  // records for the measured steps, node-level ones for the attribution steps after them. Applies
  // only when CUPTI traces (the host-clock fallback has no levels).
  const bool want_graph_level = o.graph && o.graph_trace != "node";
  const int attribution_steps = o.attribution_steps > 0 ? o.attribution_steps : 1;
  bool graph_level = false;  // decided by the main thread before `go`
  std::barrier warm(ranks + 1), go(ranks + 1), measured(ranks + 1), switched(ranks + 1);
  std::optional<CuptiTracer> cupti;
  std::optional<HostClockTracer> host;
  std::unique_ptr<LockedTracer> shared;
  std::vector<std::string> errors(ranks);
  timing->assign(ranks, RankTiming{});
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      bool arrived_warm = false, arrived_go = false, arrived_measured = false, arrived_switched = false;
      try {
        if (cuda) CUDA_CHECK(cudaSetDevice(ranks > 1 ? r : home_device));
        EngineOptions e = eo;
        e.comm = comms.empty() ? nullptr : comms[r].get();
        NvtxTracer untraced;
        DecodeEngine engine(cfg, weights[r], e, untraced);
        engine.pool().fill_context(context, engine.stream());
        std::vector<int32_t> tokens(o.batch);
        for (int b = 0; b < o.batch; ++b) tokens[b] = int32_t(splitmix64(o.seed + b) % uint64_t(cfg.vocab_size));
        engine.set_step_index(-o.warmup);
        for (int i = 0; i < o.warmup; ++i) tokens = engine.step(tokens);
        for (int i = 0; i < o.untraced_steps; ++i) {
          tokens = engine.step(tokens);
          (*timing)[r].untraced_us.push_back(engine.last_step_us());
        }
        engine.set_step_index(0);
        if (cuda) CUDA_CHECK(cudaDeviceSynchronize());
        arrived_warm = true;
        warm.arrive_and_wait();
        arrived_go = true;
        go.arrive_and_wait();
        engine.set_tracer(*shared);
        if (o.graph) engine.reset_graph();
        // One traced step first (step -1: left out of the analysis and of traced_step_us): CUPTI's
        // one-time costs (instrumenting each kernel's module on its first traced launch) and, with
        // --graph, the re-capture land there, not in the steady state the overhead limit is about.
        engine.set_step_index(-1);
        tokens = engine.step(tokens);
        (*timing)[r].traced_first_us = engine.last_step_us();
        engine.set_step_index(0);
        for (int i = 0; i < o.steps; ++i) {
          tokens = engine.step(tokens);
          (*timing)[r].traced_us.push_back(engine.last_step_us());
        }
        if (cuda) CUDA_CHECK(cudaDeviceSynchronize());
        arrived_measured = true;
        measured.arrive_and_wait();  // the main thread switches CUPTI to node level (if graph level)
        arrived_switched = true;
        switched.arrive_and_wait();
        if (graph_level) {
          (*timing)[r].graph_level = true;
          // The graph instantiated under graph-level tracing is dropped: the next step captures and
          // instantiates it again with kernel activity on (left out: step -1, like the first traced
          // step), then the attribution steps continue the step numbering of the measured ones.
          engine.reset_graph();
          engine.set_step_index(-1);
          tokens = engine.step(tokens);
          (*timing)[r].attribution_first_us = engine.last_step_us();
          engine.set_step_index(o.steps);
          for (int i = 0; i < attribution_steps; ++i) {
            tokens = engine.step(tokens);
            (*timing)[r].attribution_us.push_back(engine.last_step_us());
          }
          if (cuda) CUDA_CHECK(cudaDeviceSynchronize());
        }
        engine.set_tracer(untraced);
      } catch (const std::exception& ex) {
        errors[r] = ex.what();
        if (!arrived_warm) warm.arrive_and_drop();
        if (!arrived_go) go.arrive_and_drop();
        if (!arrived_measured) measured.arrive_and_drop();
        if (!arrived_switched) switched.arrive_and_drop();
      }
    });
  warm.arrive_and_wait();  // every rank warmed up: start tracing
  // CUPTI unavailable (cuptiActivityEnable fails: no support, another profiler attached; or
  // GLM5_FORCE_NO_CUPTI=1): fall back to the host clock around a device synchronize per op.
  std::string no_cupti;
  if (cuda) {
    cupti.emplace(want_graph_level ? GraphTraceLevel::graph : GraphTraceLevel::node);
    if (!cupti->ok()) {
      for (const std::string& e : cupti->errors()) no_cupti += (no_cupti.empty() ? "" : "; ") + e;
      (void)cupti->finish();
      cupti.reset();
    }
  }
  if (!cupti) {
    host.emplace();
    if (cuda) host->set_sync([] { CUDA_CHECK(cudaDeviceSynchronize()); });
  }
  shared = std::make_unique<LockedTracer>(cupti ? static_cast<OpTracer&>(*cupti) : static_cast<OpTracer&>(*host));
  // CUPTI may refuse GRAPH_TRACE: the tracer then stays at node level and the run is a plain one.
  graph_level = cupti && cupti->graph_trace_level() == GraphTraceLevel::graph;
  go.arrive_and_wait();
  measured.arrive_and_wait();  // every rank ran its measured steps and synchronized its device
  if (graph_level) cupti->set_graph_trace_level(GraphTraceLevel::node);
  switched.arrive_and_wait();
  for (std::thread& th : threads) th.join();
  Timeline t = cupti ? cupti->finish() : host->finish();
  for (RankTiming& rt : *timing) rt.graph_trace = !o.graph ? "none" : graph_level ? "graph" : "node";
  if (graph_level)
    for (int r = 0; r < ranks; ++r) {
      const int device = ranks > 1 ? r : -1;
      for (const auto& [step, us] : graph_step_us(t, device))
        if (step < o.steps) (*timing)[r].graph_record_us.push_back(us);
    }
  if (!no_cupti.empty())
    t.messages.insert(t.messages.begin(), std::string(kHostClockFallback) + " (" + no_cupti + ")");
  for (int r = 0; r < ranks; ++r)
    require(errors[r].empty(), (ranks > 1 ? "rank " + std::to_string(r) + ": " : std::string()) + errors[r]);
  return t;
}

}  // namespace

size_t memory_budget_bytes(bool cuda, size_t* free_bytes, size_t* total_bytes) {
  size_t free_b = size_t(24) << 30, total_b = free_b;
  if (cuda) CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (free_bytes) *free_bytes = free_b;
  if (total_bytes) *total_bytes = total_b;
  return size_t(double(free_b) * 0.95);
}

std::string run_profile(const ProfileOptions& o, ReportInput* result) {
  // Validate everything that needs no work first, so a bad option fails at once.
  require_usage(o.batch >= 1 && o.batch <= 4096, "--batch must be in [1, 4096], got " + std::to_string(o.batch));
  require_usage(o.steps >= 1 && o.steps <= 1000, "--steps must be in [1, 1000], got " + std::to_string(o.steps));
  require_usage(o.warmup >= 0 && o.warmup <= 1000, "--warmup must be in [0, 1000], got " + std::to_string(o.warmup));
  require_usage(o.share_mlp == "auto" || o.share_mlp == "on" || o.share_mlp == "off",
          "--share-mlp must be auto, on or off, got '" + o.share_mlp + "'");
  if (!o.validate_only) check_output_dir(o.out_dir);  // (a pre-flight writes nothing; its caller checks its own --out)

  const bool cuda = resolve_backend(o.backend) == Backend::Cuda;
  require_usage(o.tp >= 1 && o.tp <= 64, "--tp must be in [1, 64], got " + std::to_string(o.tp));
  require_usage(o.rank < o.tp, "--rank " + std::to_string(o.rank) + " must be below --tp " + std::to_string(o.tp));
  const bool multi_gpu = o.tp > 1 && o.rank < 0;  // every rank on its own GPU of this process
  require_usage(!multi_gpu || cuda, "--tp " + std::to_string(o.tp) + " without --rank needs " + std::to_string(o.tp) +
                                  " GPUs; on one GPU or the CPU add --rank R to profile one rank's shard");
  require_usage(o.nccl_id_file.empty() || (o.rank >= 0 && cuda),
          "--nccl-id-file needs --rank R and the CUDA backend (one process per rank)");
  // Without --model a checkpoint folder brings its own config.json (validated like any other); only
  // synthetic weights fall back to the backend's default model.
  std::string model = o.model;
  if (model.empty() && o.weights != "synthetic") {
    require_checkpoint_folder(o.weights);
    model = o.weights;
  }
  ModelConfig cfg = resolve_model_config(model.empty() ? (cuda ? "glm5" : "glm5-tiny") : model);
  // --model config.json (or a checkpoint's) inside --out under an output's name would be replaced by the report.
  if (!o.validate_only && !model.empty()) {
    namespace fs = std::filesystem;
    const fs::path out(o.out_dir);
    require_outputs_not_inputs({(out / "trace.json").string(), (out / "report.json").string(), (out / "report.md").string()},
                               model_config_inputs(model), "--out folder");
  }
  // The shard sizes DecodeEngine divides by --tp, checked here as usage (exit 2) before the banner and any
  // allocation (the engine's own check came after both, exit 1; bad-input review, session 29).
  const std::string shard_error = tp_shard_error(cfg, o.tp);
  require_usage(shard_error.empty(), shard_error);
  const bool tiny = cfg.hidden_size <= 1024;
  int context = o.context >= 0 ? o.context : (cuda && !tiny ? 32768 : 256);
  int64_t pool = o.pool_tokens >= 0 ? o.pool_tokens : (cuda && !tiny ? 495000 : 4096);
  require_usage(context >= 0 && context <= cfg.max_position_embeddings,
          "--context must be in [0, max_position_embeddings = " + std::to_string(cfg.max_position_embeddings) +
              "], got " + std::to_string(context));
  require_usage(o.untraced_steps >= 0 && o.untraced_steps <= 1000,
          "--untraced-steps must be in [0, 1000], got " + std::to_string(o.untraced_steps));
  require_usage(!o.graph || cuda, "--graph needs the CUDA backend (CUDA graphs); drop it or use --backend cuda on a GPU");
  require_usage(o.graph_trace.empty() || o.graph_trace == "graph" || o.graph_trace == "node",
          "--graph-trace must be graph or node, got '" + o.graph_trace + "'");
  require_usage(o.graph_trace.empty() || o.graph,
          "--graph-trace " + o.graph_trace + " applies to CUDA graph replays only: add --graph or drop it");
  const bool prefetching = o.o_proj_l2_prefetch > 0 || o.q_up_l2_prefetch > 0;
  require_usage(!prefetching || (cuda && o.overlap != "off"),
          "--l2-prefetch-o-proj / --l2-prefetch-q-up run on the side stream: they need the CUDA backend and --overlap on");
  require_usage(prefetching || (o.l2_prefetch_period == 0 && o.l2_prefetch_evict_last != "on" && o.l2_persist_mib == 0),
          "--l2-prefetch-period / --l2-prefetch-evict-last / --l2-persist-mib shape an L2 prefetch: add "
          "--l2-prefetch-o-proj F or --l2-prefetch-q-up F");
  require_usage(o.l2_prefetch_join != "on" || o.o_proj_l2_prefetch > 0,
          "--l2-prefetch-join on joins the o_proj prefetch: add --l2-prefetch-o-proj F");
  require_usage(o.attribution_steps == -1 || (o.attribution_steps >= 1 && o.attribution_steps <= 100),
          "--attribution-steps must be in [1, 100], got " + std::to_string(o.attribution_steps));
  // Graph-level tracing is the default with --graph: node-level tracing of a replay costs CUPTI ~1 us
  // per kernel node (1,800 nodes at batch 1: 5-13% of the step, over issue 4's 2% limit), while one
  // record per graph launch costs nothing measurable; the per-op attribution comes from separate
  // node-level steps instead.
  const bool graph_level = o.graph && o.graph_trace != "node";
  require_usage(o.attribution_steps == -1 || graph_level,
          "--attribution-steps applies to --graph-trace graph only (node level attributes every measured step)");
  const int attribution_steps = graph_level ? (o.attribution_steps > 0 ? o.attribution_steps : 1) : 0;
  // + the first traced step; with graph level + the left-out re-capture step and the attribution steps
  const int max_seq = context + o.warmup + o.untraced_steps + 1 + o.steps + (graph_level ? 1 + attribution_steps : 0);
  require_usage(max_seq <= cfg.max_position_embeddings,
          "--context " + std::to_string(context) + " + --warmup + --steps must stay within max_position_embeddings = " +
              std::to_string(cfg.max_position_embeddings));
  require_usage(pool >= 1, "--pool-tokens must be positive, got " + std::to_string(pool));
  // Bounded so the byte counts below cannot overflow (2^40 tokens is ~1 PB of latent cache).
  require_usage(pool <= (int64_t(1) << 40), "--pool-tokens " + std::to_string(pool) +
                                          " is absurd: at most 2^40 = 1099511627776 tokens per layer");
  // The pool holds whole 64-token pages (KvPool): the report states the capacity that runs (--pool-tokens 65 ran and
  // cast 128 rows while its report said 65; bad-input attack, session 31).
  pool = (pool + 63) / 64 * 64;
  std::vector<KvPath> paths = o.paths;
  if (paths.empty()) paths = o.kv_fp8 ? std::vector<KvPath>{KvPath::Cast, KvPath::GatherCast, KvPath::Fp8}
                                      : std::vector<KvPath>{KvPath::Bf16};
  if (!o.kv_fp8) paths = {KvPath::Bf16};  // a BF16 pool has nothing to cast: one path

  // Memory plan: weights + the largest path's pool and scratch must fit.
  WeightOptions wo;
  wo.where = cuda ? Where::Device : Where::Host;
  wo.matrix_dtype = cuda ? DType::BF16 : DType::F32;
  require_usage(o.weights_dtype == "bf16" || o.weights_dtype == "fp8", "--weights-dtype must be bf16 or fp8, got '" + o.weights_dtype + "'");
  if (o.validate_only) return {};  // ProfileOptions::validate_only: the usage checks above are all there is
  wo.fp8_linear = o.weights_dtype == "fp8";
  EngineOptions eo;
  eo.backend = cuda ? Backend::Cuda : Backend::Cpu;
  eo.batch = o.batch;
  eo.max_seq_len = max_seq;
  eo.pool_tokens = pool;
  eo.seed = o.seed;
  eo.precision = ActivationPrecision::Bf16;  // as BF16 serving stacks run their projections
  eo.graph = o.graph;
  eo.fp8_tma_gemv = o.fp8_gemv == "tma";
  eo.gemv_l2_lookahead = o.gemv_l2_lookahead;
  eo.overlap = o.overlap != "off";
  eo.o_proj_l2_prefetch = o.o_proj_l2_prefetch;
  eo.q_up_l2_prefetch = o.q_up_l2_prefetch;
  eo.l2_prefetch_period = o.l2_prefetch_period;
  eo.l2_prefetch_evict_last = o.l2_prefetch_evict_last == "on";
  eo.l2_persist_mib = o.l2_persist_mib;
  eo.l2_prefetch_join = o.l2_prefetch_join == "on";
  eo.mma_pdl = o.mma_pdl != "off";
  eo.fp8_mma_max_m = o.fp8_mma_max_m;
  eo.fp8_large_m = o.fp8_large_m == "block-scaled" ? LinearContext::Fp8LargeM::BlockScaled
                   : o.fp8_large_m == "wgmma"      ? LinearContext::Fp8LargeM::Wgmma
                                                   : LinearContext::Fp8LargeM::Dequant;
  eo.fp8_wgmma_stream_k = o.fp8_wgmma_cut != "split-k";
  eo.o_proj_pdl = o.o_proj_pdl == "on";
  eo.absorb_tc = o.absorb_tc == "on";
  eo.moe_down_early = o.moe_down_early == "on";
  eo.moe_shared_late = o.moe_shared_late == "on";
  eo.moe_gate_fused = o.moe_gate_fused == "on";
  eo.qkv_a_admit_at_exit = o.qkv_a_admit_at_exit == "on";
  eo.score_early_keys = o.score_early_keys == "on";
  eo.absorb_after_score = o.absorb_after_score == "on";
  eo.prologue_slim = o.prologue_slim == "on";
  eo.moe_route_rank = o.moe_route_rank == "on";
  eo.unabsorb_l2_prefetch = o.unabsorb_l2_prefetch != "off";
  eo.unabsorb_l2_prefetch_loads = o.unabsorb_l2_prefetch == "loads";
  eo.mla_fp8_bf16_operands = o.mla_fp8_operands == "bf16";
  eo.moe_fused = o.moe_fused == "on";
  eo.moe_wgmma = o.moe_wgmma == "on";
  eo.moe_combine_norm = o.moe_combine_norm == "on";
  eo.gemv_fold = o.gemv_fold == "on";
  eo.side_priority = o.side_priority == "on";
  eo.topk_cluster = o.topk_cluster;
  eo.topk_gather = o.topk_gather == "on";
  eo.topk_score_hist = o.topk_score_hist == "on";
  eo.topk_flat = o.topk_flat == "on";
  eo.indexer_first = o.indexer_first == "on";
  KvPoolOptions po;
  po.fp8 = o.kv_fp8;
  po.capacity_tokens = pool;
  po.batch = o.batch;
  po.max_seq_len = max_seq;
  // Before the memory plan and the banner, so that a pool too small for batch x context is the run's one line.
  const std::string pool_full = KvPool::capacity_error(po);
  require(pool_full.empty(), pool_full);
  const size_t pool_bytes = KvPool::planned_bytes(cfg, po);
  size_t scratch = 0;
  for (KvPath p : paths) {
    eo.kv_path = p;
    scratch = std::max(scratch, DecodeEngine::planned_scratch_bytes(cfg, eo, pool));
  }
  size_t free_b = 0, total_b = 0;
  const size_t budget = memory_budget_bytes(cuda, &free_b, &total_b);
  wo.share_mlp_weights = o.share_mlp == "on";
  size_t unshared = estimate_weight_bytes(cfg, wo);
  if (o.share_mlp == "auto" && unshared + pool_bytes + scratch > budget) wo.share_mlp_weights = true;
  const size_t weight_bytes = estimate_weight_bytes(cfg, wo);
  const size_t need = weight_bytes + pool_bytes + scratch;
  require(need <= budget, "model does not fit: weights " + gib(double(weight_bytes)) + (wo.share_mlp_weights ? " (MLP/expert weights shared)" : "") +
                              " + KV pool " + gib(double(pool_bytes)) + " + scratch " + gib(double(scratch)) + " = " +
                              gib(double(need)) + " (" + std::to_string(need) + " bytes), but only " + gib(double(free_b)) +
                              " (" + std::to_string(free_b) + " bytes) is free" +
                              (cuda ? " on the GPU" : " (CPU backend limit)") +
                              "; lower --pool-tokens / --batch / --context" + std::string(wo.share_mlp_weights ? "" : " or use --share-mlp on"));

  std::vector<std::unique_ptr<Communicator>> comms;
  if (multi_gpu) {
    comms = make_nccl_communicators(o.tp);
  } else if (!o.nccl_id_file.empty()) {
    int devices = 0;
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    CUDA_CHECK(cudaSetDevice(o.rank % devices));
    comms.push_back(make_nccl_communicator_from_file(o.nccl_id_file, o.tp, o.rank));
  } else if (o.tp > 1) {
    comms.push_back(make_simulated_communicator(o.rank, o.tp));
  }
  const int ranks = multi_gpu ? o.tp : 1;
  std::vector<Weights> rank_weights;  // rank r's copy on GPU r (each rank reads only its shard)
  int home_device = 0;
  if (cuda) CUDA_CHECK(cudaGetDevice(&home_device));
  for (int r = 0; r < ranks; ++r) {
    if (cuda && ranks > 1) CUDA_CHECK(cudaSetDevice(r));
    rank_weights.push_back(o.weights == "synthetic" ? synthetic_weights(cfg, o.seed, wo) : load_weights(cfg, o.weights, wo));
  }
  if (cuda) CUDA_CHECK(cudaSetDevice(home_device));
  if (!o.quiet)  // after the weights loaded: a failed load prints its one error line only
    std::fprintf(stderr, "glm5prof: %s on %s, %d layers, batch %d, context %d, pool %lld tokens; weights %s%s\n",
                 cfg.name.c_str(), cuda ? "CUDA" : "CPU", cfg.num_hidden_layers, o.batch, context,
                 (long long)pool, gib(double(weight_bytes)).c_str(), wo.share_mlp_weights ? " (shared MLP)" : "");

  Peaks peaks;
  if (cuda) {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreate(&s));
    peaks.copy_gbps = measure_copy_gbps(s);
    CUDA_CHECK(cudaStreamDestroy(s));
    peaks.bf16_tflops = 790.0;
  }

  ReportInput report;
  report.run_spec = json{{"command", "profile"},
                         {"backend", cuda ? "cuda" : "cpu"},
                         {"model", cfg.name},
                         {"weights", o.weights},
                         {"weights_dtype", o.weights_dtype},
                         {"kv_dtype", o.kv_fp8 ? "fp8" : "bf16"},
                         {"batch", o.batch},
                         {"context", context},
                         {"pool_tokens", pool},
                         {"steps", o.steps},
                         {"warmup", o.warmup},
                         {"untraced_steps", o.untraced_steps},
                         {"graph", o.graph},
                         {"graph_trace", o.graph ? (graph_level ? "graph" : "node") : "none"},
                         {"attribution_steps", attribution_steps},
                         {"seed", o.seed},
                         {"tp", o.tp},
                         {"rank", o.rank < 0 ? json("all") : json(o.rank)},
                         {"collectives", comms.empty() ? "none" : comms[0]->kind()},
                         {"activations", cuda ? "bf16 (cuBLASLt BF16 x BF16 -> FP32)" : "fp32"},
                         // The engine's tuning options as given (defaults included), so two reports can be told
                         // apart by what was set, not only by their numbers (bad-input review, session 18).
                         {"tuning", json{{"fp8_gemv", o.fp8_gemv},
                                         {"gemv_l2_lookahead", o.gemv_l2_lookahead},
                                         {"overlap", o.overlap},
                                         {"o_proj_l2_prefetch", o.o_proj_l2_prefetch},
                                         {"q_up_l2_prefetch", o.q_up_l2_prefetch},
                                         {"l2_prefetch_period", o.l2_prefetch_period},
                                         {"l2_prefetch_evict_last", o.l2_prefetch_evict_last},
                                         {"l2_persist_mib", o.l2_persist_mib},
                                         {"l2_prefetch_join", o.l2_prefetch_join},
                                         {"fp8_mma_max_m", o.fp8_mma_max_m},
                                         {"fp8_large_m", o.fp8_large_m},
                                         {"fp8_wgmma_cut", o.fp8_wgmma_cut},
                                         {"mma_pdl", o.mma_pdl},
                                         {"o_proj_pdl", o.o_proj_pdl},
                                         {"absorb_tc", o.absorb_tc},
                                         {"moe_down_early", o.moe_down_early},
                                         {"moe_shared_late", o.moe_shared_late},
                                         {"moe_gate_fused", o.moe_gate_fused},
                                         {"qkv_a_admit_at_exit", o.qkv_a_admit_at_exit},
                                         {"score_early_keys", o.score_early_keys},
                                         {"unabsorb_l2_prefetch", o.unabsorb_l2_prefetch},
                                         {"mla_fp8_operands", o.mla_fp8_operands},
                                         {"absorb_after_score", o.absorb_after_score},
                                         {"prologue_slim", o.prologue_slim},
                                         {"moe_route_rank", o.moe_route_rank},
                                         {"moe_fused", o.moe_fused},
                                         {"moe_wgmma", o.moe_wgmma},
                                         {"moe_combine_norm", o.moe_combine_norm},
                                         {"gemv_fold", o.gemv_fold},
                                         {"side_priority", o.side_priority},
                                         {"topk_cluster", o.topk_cluster},
                                         {"topk_gather", o.topk_gather},
                                         {"topk_score_hist", o.topk_score_hist},
                                         {"topk_flat", o.topk_flat},
                                         {"indexer_first", o.indexer_first}}}};
  report.device = device_json(cuda, peaks);
  report.model = model_json(cfg);
  report.memory_fit = json{{"weights_bytes", weight_bytes},
                           {"weights_if_distinct_bytes", unshared},
                           {"mlp_weights_shared", wo.share_mlp_weights},
                           {"kv_pool_bytes", pool_bytes},
                           {"scratch_bytes", scratch},
                           {"total_bytes", need},
                           {"device_free_bytes", free_b},
                           {"device_total_bytes", total_b},
                           {"note", wo.share_mlp_weights
                                        ? "Every MoE layer reads one shared set of expert weights (and dense layers one "
                                          "MLP); attention weights and the KV cache are distinct per layer. The per-layer "
                                          "expert working set is far larger than L2, so timings are those of distinct weights."
                                        : "All weights distinct per layer."}};

  std::vector<Timeline> timelines;
  std::vector<RunWindow> windows;  // one per KV path: analyze splits the merged trace by them
  std::vector<std::pair<std::string, Analysis>> analyses;
  bool said_fallback = false;
  for (KvPath path : paths) {
    eo.kv_path = path;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<RankTiming> timing;
    Timeline t = run_ranks(cfg, rank_weights, eo, comms, cuda, context, o, &timing);
    double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (cuda && t.source == "host-clock" && !said_fallback && !t.messages.empty()) {
      std::fprintf(stderr, "glm5prof: %s\n", t.messages.front().c_str());  // once, not per KV path
      said_fallback = true;
    }
    for (int r = 0; r < ranks; ++r) {
      Analysis a = analyze(ranks > 1 ? device_part(t, r) : t, peaks);
      RunReport rr;
      rr.name = kv_path_name(path) + (ranks > 1 ? "/rank" + std::to_string(r) : "");
      if (!o.quiet) {
        const double u = median_of(timing[r].untraced_us), tr = median_of(timing[r].traced_us);
        std::fprintf(stderr, "glm5prof: path %-11s step median %.1f us (%d steps, %.0f ms wall), KV cast %.1f us; "
                     "untraced %.1f us, traced %.1f us (%+.2f%%)%s\n",
                     rr.name.c_str(), a.step_median_us, o.steps, wall_ms, a.cast_us, u, tr,
                     u > 0 ? 100.0 * (tr / u - 1.0) : 0.0,
                     !o.graph ? "" : timing[r].graph_level ? ", CUDA graph, graph-level tracing" : ", CUDA graph, node-level tracing");
        if (timing[r].graph_level) {
          const double at = median_of(timing[r].attribution_us);
          std::fprintf(stderr, "glm5prof: path %-11s attribution step (node-level tracing, %zu step%s) %.1f us (%+.2f%%)\n",
                       rr.name.c_str(), timing[r].attribution_us.size(), timing[r].attribution_us.size() == 1 ? "" : "s",
                       at, u > 0 ? 100.0 * (at / u - 1.0) : 0.0);
        }
      }
      rr.spec = json{{"kv_path", kv_path_name(path)}, {"batch", o.batch}, {"context", context}, {"pool_tokens", pool},
                     {"tp", o.tp}, {"rank", o.rank < 0 ? r : o.rank}, {"graph", o.graph}};
      rr.analysis = a;
      rr.timing = timing_json(timing[r], cuda);
      if (cuda) {
        StepFloorInput fi;
        fi.batch = o.batch;
        fi.context = context;
        fi.kv_fp8 = o.kv_fp8;
        fi.tp = o.tp;
        fi.copy_gbps = peaks.copy_gbps;
        const StepFloor f = step_floor(cfg, rank_weights[ranks > 1 ? r : 0], fi);  // bytes as loaded (BF16 / FP8)
        rr.floor = to_json(f, fi);
        const double u = rr.timing.value("untraced_step_us", 0.0);
        const double step = u > 0 ? u : a.step_median_us;
        rr.floor["step_us"] = step;
        rr.floor["step_us_source"] = u > 0 ? "untraced step (CUDA events)" : "traced step median (kernel span)";
        rr.floor["ratio"] = f.floor_us > 0 ? step / f.floor_us : 0.0;
      }
      report.runs.push_back(rr);
      if (r == 0) analyses.emplace_back(kv_path_name(path), a);
    }
    windows.push_back(run_window(t, kv_path_name(path)));
    timelines.push_back(std::move(t));
  }
  if (analyses.size() > 1) report.comparison = compare_paths(analyses);

  namespace fs = std::filesystem;
  fs::path out(o.out_dir);
  create_output_dir(o.out_dir);
  AtomicOutputs files;  // all three or none
  Timeline merged = merge_timelines(timelines);
  merged.copy_gbps = peaks.copy_gbps;
  merged.bf16_tflops = peaks.bf16_tflops;
  if (windows.size() > 1) merged.runs = windows;
  write_chrome_trace(merged, (out / "trace.json").string(), std::max(o.rank, 0), o.tp, &files);
  write_report_json(report, (out / "report.json").string(), &files);
  write_report_md(report, (out / "report.md").string(), &files);
  files.commit();

  std::ostringstream s;
  s << "wrote " << (out / "trace.json").string() << ", " << (out / "report.json").string() << ", "
    << (out / "report.md").string() << "\n";
  for (const RunReport& r : report.runs)
    s << "  " << r.name << ": step " << r.analysis.step_median_us << " us, KV cast " << r.analysis.cast_us << " us ("
      << (r.analysis.step_median_us > 0 ? 100.0 * r.analysis.cast_us / r.analysis.step_median_us : 0.0) << "% of step)\n";
  if (report.comparison) s << "  fastest path: " << report.comparison->winner << "\n";
  if (result) *result = std::move(report);
  return s.str();
}

}  // namespace glm5
