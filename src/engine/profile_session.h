// `glm5prof profile`: build the model, run the decode engine over each requested KV path with the
// profiler attached, analyze each Timeline, compare the paths, and write trace.json, report.json
// and report.md into the output folder.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/run_spec.h"

namespace glm5 {

struct ProfileOptions {
  std::string model;              // built-in name or config.json path ("" = default for the backend)
  std::string weights = "synthetic";  // "synthetic" or a checkpoint folder
  std::string weights_dtype = "bf16";  // bf16 | fp8 (FP8 projections and experts with 128x128 block scales)
  std::string backend = "auto";   // auto | cuda | cpu
  std::vector<KvPath> paths;      // in order; empty = all three FP8 paths
  bool kv_fp8 = true;             // --kv-dtype fp8 | bf16
  int batch = 1;
  int context = -1;               // -1: default (32768 on CUDA, 256 on CPU)
  int64_t pool_tokens = -1;       // -1: default (495000 on CUDA for glm5, 4096 on CPU)
  int steps = 3;
  int warmup = 1;
  // Steps run after the warm-up without any profiler and timed with CUDA events only (host clock on
  // the CPU backend), to state the tracing overhead against the traced steps (report: timing).
  int untraced_steps = 3;
  // CUDA backend: capture each decode step into a CUDA graph once and replay it (EngineOptions::graph).
  bool graph = false;
  // With --graph, how CUPTI traces the replays (--graph-trace, Nsight Systems' --cuda-graph-trace):
  //   "node":  every measured step at node level (a kernel record per graph node, attributed to
  //            step / layer / op); costs ~1 us per kernel node, 5-13% of a batch-1 GLM-5 step.
  //   "graph": the measured steps at graph level (one CUPTI record per replay: traced_step_us is
  //            within the 2% overhead limit), then `attribution_steps` extra steps at node level whose
  //            kernels feed the per-op analysis and the trace (their time reported on its own).
  //   "":      the default: "graph" with --graph; must stay "" without --graph.
  std::string graph_trace;
  int attribution_steps = -1;     // --attribution-steps K in [1, 100] (graph level only); -1: default 1
  // How the batch-1 FP8 GEMV is fed (EngineOptions::fp8_tma_gemv): "regs" (the register-fed
  // linear_fp8_gemv) or "tma" (linear_fp8_tma: TMA boxes into a shared-memory ring). For A/B runs.
  std::string fp8_gemv = "regs";
  int gemv_l2_lookahead = 0;  // EngineOptions::gemv_l2_lookahead (0 .. 8)
  // EngineOptions::overlap: "on" (ops off the critical chain run on a side stream) or "off" (one stream, in order).
  std::string overlap = "on";
  // EngineOptions::o_proj_l2_prefetch / q_up_l2_prefetch: fractions of attn.o_proj's / attn.q_up_proj's weights
  // asked into L2 ahead of them (0: off). The same defaults as EngineOptions (a test checks they agree).
  double o_proj_l2_prefetch = 0.0;
  double q_up_l2_prefetch = 0.0;
  int l2_prefetch_period = 0;  // EngineOptions::l2_prefetch_period
  std::string l2_prefetch_evict_last = "off";  // EngineOptions::l2_prefetch_evict_last: "on" / "off"
  int l2_persist_mib = 0;                      // EngineOptions::l2_persist_mib
  int fp8_mma_max_m = 16;                      // EngineOptions::fp8_mma_max_m
  std::string fp8_large_m = "wgmma";           // EngineOptions::fp8_large_m: "dequant" / "block-scaled" / "wgmma"
  std::string fp8_wgmma_cut = "stream-k";      // EngineOptions::fp8_wgmma_stream_k: "stream-k" / "split-k"
  std::string mma_pdl = "on";                  // EngineOptions::mma_pdl: "on" / "off"
  std::string o_proj_pdl = "off";              // EngineOptions::o_proj_pdl: "on" / "off"
  std::string absorb_tc = "on";                // EngineOptions::absorb_tc: "on" / "off"
  std::string moe_down_early = "on";           // EngineOptions::moe_down_early: "on" / "off"
  std::string moe_shared_late = "on";          // EngineOptions::moe_shared_late: "on" / "off"
  std::string moe_gate_fused = "off";          // EngineOptions::moe_gate_fused: "on" / "off"
  std::string qkv_a_admit_at_exit = "off";     // EngineOptions::qkv_a_admit_at_exit: "on" / "off"
  std::string score_early_keys = "off";        // EngineOptions::score_early_keys: "on" / "off"
  std::string moe_route_rank = "off";          // EngineOptions::moe_route_rank: "on" / "off"
  std::string prologue_slim = "off";           // EngineOptions::prologue_slim: "on" / "off"
  std::string absorb_after_score = "on";       // EngineOptions::absorb_after_score: "on" / "off"
  std::string unabsorb_l2_prefetch = "off";    // EngineOptions::unabsorb_l2_prefetch(_loads): "on" / "loads" / "off"
  std::string mla_fp8_operands = "f16";        // EngineOptions::mla_fp8_bf16_operands: "f16" (false) / "bf16" (true)
  std::string moe_fused = "off";               // EngineOptions::moe_fused: "on" / "off"
  std::string moe_wgmma = "on";                // EngineOptions::moe_wgmma: "on" / "off"
  std::string moe_combine_norm = "off";        // EngineOptions::moe_combine_norm: "on" / "off"
  std::string side_priority = "on";            // EngineOptions::side_priority: "on" / "off"
  std::string gemv_fold = "on";                // EngineOptions::gemv_fold: "on" / "off"
  int topk_cluster = 0;                        // EngineOptions::topk_cluster
  std::string topk_gather = "on";              // EngineOptions::topk_gather: "on" / "off"
  std::string topk_score_hist = "on";          // EngineOptions::topk_score_hist: "on" / "off"
  std::string topk_flat = "off";               // EngineOptions::topk_flat: "on" / "off"
  std::string indexer_first = "off";           // EngineOptions::indexer_first: "on" / "off"
  std::string l2_prefetch_join = "off";        // EngineOptions::l2_prefetch_join: "on" / "off"
  uint64_t seed = 1234;
  std::string share_mlp = "auto"; // auto | on | off
  std::string out_dir = "glm5prof-out";
  // Tensor / expert parallelism: --tp N alone runs N ranks on N GPUs of this host (one thread each,
  // NCCL all-reduces, one merged trace with a pid per GPU); with --rank R it runs rank R's shard on
  // one GPU (or the CPU) with the collectives marked but not performed (a per-GPU profile of an
  // N-way server on one GPU).
  int tp = 1;
  int rank = -1;
  // One process per rank (several processes or hosts): with --rank R, a real NCCL communicator whose
  // unique id rank 0 writes to this file and the others read (a path every rank sees). The process
  // uses GPU R modulo the GPUs it sees (CUDA_VISIBLE_DEVICES narrows that).
  std::string nccl_id_file;
  bool quiet = false;
  // Check the options as usage (the same checks and UsageError messages as a run) and return "" before any
  // allocation, model weights or output (out_dir is not probed either: the caller checks its own): compare's
  // pre-flight of every point of its sweep (so --context beyond max_position_embeddings is exit 2 before the first
  // point runs, not "every point skipped" after the sweep).
  bool validate_only = false;
};

// Runs the profile and writes the outputs. Returns a one-paragraph summary for the terminal.
// Throws glm5::Error (bad options, model does not fit, unwritable output folder, ...).
// If `result` is given it receives the report's content (what report.json holds).
struct ReportInput;
std::string run_profile(const ProfileOptions& opt, ReportInput* result = nullptr);

// What a run may allocate before it starts (profile, decode): 95% of the free GPU memory (cudaMemGetInfo) with
// `cuda`, else 95% of the CPU backend's fixed 24 GiB limit. `free_bytes` / `total_bytes` (may be null) receive the
// free amount the refusal message quotes and the device's total (24 GiB for the CPU backend). Throws glm5::Error if
// cudaMemGetInfo fails.
size_t memory_budget_bytes(bool cuda, size_t* free_bytes, size_t* total_bytes = nullptr);

}  // namespace glm5
