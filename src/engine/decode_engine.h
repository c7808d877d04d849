// DecodeEngine: one GLM-5 (glm_moe_dsa) decode step for a batch of requests, written once and run
// on either backend: every op is a kernels/ family whose CPU twin (host pointers) and CUDA launcher
// (device pointers) take the same Params. Each op is wrapped in an OpTracer scope declaring its
// bytes and FLOPs, inside ranges step.N > layer.N.
//
// Per layer (HF GlmMoeDsaDecoderLayer, decode with weight absorption, DESIGN.md):
//   x += o_proj(W_UV . MLA(absorb(q), KV[top-k]))      MLA over the indexer's top-k rows, via the KV path
//   x += MLP(x) | MoE(x) + shared expert(x)
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "common/buffer.h"
#include "engine/kv_pool.h"
#include "kernels/linear.h"
#include "engine/run_spec.h"
#include "model/config.h"
#include "model/weights.h"
#include "profiler/graph_record.h"
#include "profiler/op_tracer.h"

namespace glm5 {

class LinearContext;
class Communicator;

// How the CUDA backend feeds fp32 activations to its BF16 cuBLASLt projections (CPU: always fp32).
// Bf16 is what BF16 serving stacks do and what `profile` measures; SplitBf16 (x as bf16 hi + lo,
// ~16 mantissa bits, one GEMM over 2m rows) makes the GPU engine track the fp32 CPU reference: on the
// golden checkpoint bf16 activations alone move a top-k choice and cost up to 4e-2 in the logits
// (GPU run 2026-11-29), split activations match the CPU engine to its own BF16-KV error.
enum class ActivationPrecision { Bf16, SplitBf16 };

struct EngineOptions {
  Backend backend = Backend::Cpu;
  KvPath kv_path = KvPath::Fp8;  // Bf16 requires a BF16 pool; the others an FP8 pool
  int batch = 1;
  int max_seq_len = 0;           // tokens a request may reach
  int64_t pool_tokens = 0;       // KV pool capacity per layer (0: batch * max_seq_len, page-rounded)
  uint64_t seed = 1234;
  ActivationPrecision precision = ActivationPrecision::SplitBf16;
  // Tensor / expert parallelism (DESIGN.md, SGLang/vLLM style): this engine is rank `comm->rank()`
  // of `comm->size()`: attention heads / size (q_b, kv_b rows; o_proj columns), dense-MLP and shared-
  // expert intermediate / size (gate/up rows; down columns), routed experts / size (expert parallel);
  // q_a, kv_a, the indexer, the router, embedding and lm_head replicated; the latent KV pool replicated
  // (MLA keeps one latent per token for all heads). Partial outputs are summed by comm->all_reduce_sum
  // after o_proj and after the MLP / MoE. Null: one rank, no collectives.
  Communicator* comm = nullptr;
  // CUDA backend: capture one whole decode step (all layers) into a CUDA graph once and replay it
  // every step (the first step runs eagerly: it sizes cuBLASLt's buffers and picks its algorithms;
  // the second is captured, instantiated and launched). Per-step inputs (tokens, sequence lengths,
  // slots, positions) are copied asynchronously from pinned host memory into fixed device buffers
  // before each launch; no kernel argument changes between steps. Ignored on the CPU backend and
  // while hidden states are captured (set_hidden_capture); not with NCCL collectives.
  bool graph = false;
  // CUDA, FP8 experts, batch < 4: run the shared expert inside the routed experts' launches (one more
  // (token, slot) pair per token, MoeExpertsParams.shared_gate_up) instead of two GEMVs and an
  // activation kernel (ops moe.shared.* then do not appear: moe.experts includes it). Needs the shared
  // expert's intermediate size equal to the routed experts' and unsharded weights (--tp 1).
  bool fuse_shared_expert = true;
  // CUDA, FP8 weights, m = 1: single projections run the TMA-fed GEMV (kernels/linear_fp8_tma.h,
  // LinearContext::fp8_tma_gemv) instead of the register-fed one; grouped projections are unchanged.
  bool fp8_tma_gemv = false;
  // CUDA, FP8 weights: LinearContext::fp8_gemv_l2_lookahead, every FP8 GEMV's warps asking L2 for their weights this
  // many 1024-column steps ahead of their loads (LinearGroupParams::l2_lookahead; 0 .. 8, 0 off). Tuning; the same
  // results.
  int gemv_l2_lookahead = 0;
  // CUDA: ops that do not feed the next few ops run on a side stream, overlapping the main chain (joined by
  // events; captured into the graph as parallel branches): the indexer's head weights (attn.indexer.weights_proj,
  // needed first by attn.indexer.score) beside attn.qkv_a_proj .. attn.q_up_proj, and the query absorption
  // (attn.q_absorb, needed first by attn.mla) beside attn.rope .. attn.indexer.topk. At batch 1 these are two
  // latency-bound launches of 4-9 us each per layer (S13a). false: every op on the main stream, in order.
  bool overlap = true;
  // The side stream at the device's highest stream priority (cudaStreamCreateWithPriority; captured into the graph's
  // kernel nodes), so that its small kernels are scheduled before a main-stream kernel's pending CTAs. Tried for
  // session 19's trace (S19e, batch 1 with gemv_fold: attn.indexer.weights_proj waited 16 us behind q_up's CTAs):
  // no effect (S19f: 17.70 / 17.68 ms with / without; the SMs were held by CTAs already parked in their PDL wait,
  // which the GEMV's later trigger fixed instead). Kept on, harmless. false: the default priority (tuning, A/B).
  bool side_priority = true;
  // attn.o_proj on the FP8 tensor-core path (batch 2..64) launched with PDL (kernels/launch.cuh). Off by default:
  // with PDL its CTAs are scheduled while attn.v_unabsorb still holds the SMs, and the grid, sized to one wave of
  // resident blocks (linear_fp8_mma_cuda's split-K), then runs part of itself as a second wave. Measured on the
  // H200 (S14f, rotated order, three rounds): o_proj 54.7 -> 37.1 us per layer at batch 8, the step 65.84 ->
  // 64.25 ms; batch 32 159.67 -> 158.62 ms. Turning PDL off for every tensor-core projection gained less
  // (S14e: batch 8 -0.45 ms): the others keep it. Batch 1 (GEMV) and 128 (cuBLASLt) do not take this path.
  bool o_proj_pdl = false;
  // LinearContext::fp8_mma_pdl for every FP8 tensor-core projection (tuning; S14e).
  bool mma_pdl = true;
  // attn.q_absorb / attn.v_unabsorb on the split-BF16 tensor-core kernels from batch 5 (MlaAbsorbParams::
  // tensor_cores; kernels/mla_absorb.cu). false: the fp32-FMA tiled kernels they replaced (A/B).
  bool absorb_tc = true;
  // MoeExpertsParams::down_early_loads of the per-token FP8 MoE down kernel (batch < 4): its first weight loads
  // before the PDL wait (session 17: on). MoeExpertsParams::pair_sync (moe_fused): the routed pairs' gate_up and
  // down as one persistent launch (session 17; A/B). The same bits every way.
  bool moe_down_early = true;
  // MoeExpertsParams::shared_late_trigger of the shared expert's stage on the side stream (batch < 4, FP8): its down
  // kernel admitted only when its gate_up CTAs exit, so the routed experts' gate_up finds free SM slots (session 20).
  // The same bits either way.
  bool moe_shared_late = true;
  // CUDA, batch <= 4, MoE layers: mlp.norm, moe.router and moe.route as one launch (kernels/moe_gate.h, op moe.router;
  // moe.route then launches nothing, and mlp.norm only beside the shared expert on the side stream) where
  // moe_gate_fusable holds (the BF16 router GEMV). The same bits (session 20). Off by default: measured on the H200 it
  // did not beat the three launches at batch 1 (S20b: +0.44 ms per step with the shared expert forked after it; S20c,
  // forked before it with its own norm: +0.06 ms, the gate ending 12 us after attn.o_proj against the three launches'
  // 11.6). Tuning (A/B).
  bool moe_gate_fused = false;
  // LinearGroupParams::admit_next_at_exit of the folded attn.qkv_a_proj (gemv_fold, batch 1): attn.q_up_proj's CTAs
  // scheduled only when qkv_a's exit, so that the side stream's KV / indexer-key prologue (which attn.indexer.score
  // waits for) is not queued behind q_up's 1280 CTAs (S20a trace: it started ~8 us after qkv_a ended). Tuning; off:
  // measured slower (S21a, 8 processes: +0.26 ms median; q_up 3.4 us per layer longer without its loads under qkv_a's
  // tail, and the prologue still started ~11 us after qkv_a).
  bool qkv_a_admit_at_exit = false;
  // IndexerScoreParams::fresh = 1 for attn.indexer.score: its first key loads before the PDL wait (the new token's
  // key loaded again after it). Tuning; the same results. Off: no change measured (S21a, 4 processes).
  bool score_early_keys = false;
  // MlaDecodeParams::l2_prefetch of attn.mla: where its combine kernel runs (split-K at small batch), the combine's
  // CTAs, admitted when attn.mla starts, ask L2 for attn.v_unabsorb's W_UV rows (each its head's, BF16 kv_b) before
  // their PDL wait, so the unabsorb GEMV, admitted only once the combine passes its wait, reads them from L2 and not
  // HBM while attn.mla keeps HBM nearly idle (S20a chain: combine 3.3 + unabsorb 6.2 us per layer at batch 1, the
  // unabsorb's 16.8 MB at ~2.7 TB/s). Tuning (A/B); the same results.
  // Off: no step change (S21a, prefetch requests: the unabsorb -0.6 us per layer, attn.mla +0.3; S21b, loads: the
  // 54-register combine no longer fits beside attn.mla's blocks, +3.9 us per layer).
  bool unabsorb_l2_prefetch = false;
  // attn.q_absorb (side stream segment 1) forked after attn.indexer.score instead of after attn.q_up_proj: it then
  // runs beside attn.indexer.topk (8 blocks at batch 1, the rest of the GPU idle) instead of beside the score kernel,
  // which it slowed (S21a trace, batch 1: score 13.8 us beside q_absorb's 256 blocks, 8.3-9.0 us alone under Nsight
  // Compute). Needs the side stream and an indexer; else the fork stays after q_up. The same results. Default on
  // (S21e, one H200, A B B A A B B A: batch-1 step 17.16-17.41 ms against 17.68-17.82 off, median -0.50 ms; score
  // 543-547 against 1039-1045 us per step, top-k +40, attn.mla +55; batch 8: 63.52 / 64.10 against 64.55 / 64.58).
  bool absorb_after_score = true;
  // AttnPrologueParams::slim for attn.prologue: its blocks fit beside the batch-1 GEMV's, so the side stream's KV /
  // indexer-key prologue starts when attn.qkv_a_proj ends, not when attn.q_up_proj's first wave retires (S21a trace:
  // 11.5 us after qkv_a; attn.indexer.score waits for it). Tuning; the same results. Off: measured slower (S21e, with
  // absorb_after_score on both sides: 17.17-17.31 ms against 16.80-17.07; the prologue 674-682 against 604-610 us per
  // step with its spills, the score 589-598 against 540-546).
  bool prologue_slim = false;
  // MoeRouteParams::rank_form for moe.route (the unfused gate): one block per token ranks every expert at once
  // instead of one warp's 8 serial picks (S21a trace, batch 1: moe.route ended 6.6 us after moe.router). Tuning; the
  // same ids and weights. Off: measured slower (S21e: moe.route 454-465 against 436-445 us per step, the step 16.97-
  // 17.25 ms against 16.79-17.23).
  bool moe_route_rank = false;
  bool unabsorb_l2_prefetch_loads = false;  // MlaDecodeParams::l2_prefetch_loads (profile --unabsorb-l2-prefetch loads)
  // MlaDecodeParams::fp8_bf16_operands for attn.mla (profile --mla-fp8-operands bf16): the `fp8` path's wgmma MLA
  // with bf16 operands (the cast paths' K / V values: the three KV paths give identical bits) instead of fp16 ones
  // (the default: faster, nearer exact; agrees with the cast paths to bf16 rounding, DESIGN.md).
  bool mla_fp8_bf16_operands = false;
  bool moe_fused = false;
  // TopkParams::cluster of attn.indexer.topk: GPU blocks per request (0: topk_cuda's choice; 1, 2, 4, 8: forced,
  // tuning; S18b at batch 1 / 32K: 4 blocks 1433 us per step against the automatic 8's 1226). The same slots.
  int topk_cluster = 0;
  // TopkParams::gather of attn.indexer.topk: after the first pass, the top digit's keys are resolved by one block of
  // the cluster (two cluster barriers instead of five; session 22). false: the three cluster passes (A/B). The
  // same slots.
  bool topk_gather = true;
  // IndexerScoreParams::top_hist / TopkParams::top_hist: attn.indexer.score also builds the histogram of its scores'
  // first radix digits, and attn.indexer.topk reads it instead of building and merging its own (session 22), at the
  // batches where it pays (topk_score_hist_pays: B <= 66 on an H200). The same slots. false: the top-k's own first
  // pass (A/B).
  bool topk_score_hist = true;
  // TopkParams::flat_workspace of attn.indexer.topk, where the score kernel's histogram is built (topk_score_hist)
  // and the flat form fits (topk_flat_fits): per request a grid of small blocks instead of a cluster of whole SMs, the
  // k-th key resolved by the last block to finish (session 35). The same slots. Off: slower on the H100 (S35a, batch
  // 1 / 32K: the top-k adds 21.5 us to the layer against the cluster form's 15.9; reports/2026-12-07-topk-flat-s35.md).
  bool topk_flat = false;
  // attn.indexer.wq_b as its own GEMV, then attn.indexer.score and attn.indexer.topk, on the main stream after the
  // prologue (also moved there), while attn.q_b_proj (alone) and attn.q_absorb run forked on the side stream; the main
  // stream gets the highest priority, the side stream the lowest. At batch 1 the score kernel otherwise waits for the
  // whole q_up group (q_b + the indexer's wq_b, 15-19 us) and the chain after q_up (score 7.6 + top-k 13 us, S22b) runs
  // while HBM is nearly idle. Only where the GEMV folds the q_a norm into both projections and their RoPE (gemv_fold,
  // batch 1, a side stream); else the q_up group as before. The same results. Tuning; off: measured slower (session
  // 23: S23b +0.31 ms per batch-1 step, 8 processes; S23a's first form, the chain on the side stream, +0.70): q_b's
  // CTAs fill every SM, so the chain's kernels wait for them either way.
  bool indexer_first = false;
  // MoeExpertsParams::next_norm_weight (batch < 4, FP8 experts, --tp 1): the MoE combine also computes the next
  // layer's attn.norm (or the final norm) and that op's launch is skipped; its time then shows in moe.experts
  // (session 17; A/B). The same bits either way.
  bool moe_combine_norm = false;
  // CUDA, where the FP8 GEMV runs the projection group (batch 1): ops folded into the GEMVs, three latency-bound
  // launches fewer on the main chain per layer (session 19). false: each as its own kernel.
  //  - with a side stream (overlap; linear_group_norm_fused): attn.norm into attn.qkv_a_proj and attn.q_a_norm into
  //    attn.q_up_proj (LinearGroupParams::norm: each CTA stages x * norm weight and sums x^2, its sums scaled by
  //    inv_rms). Equal to the separate norms up to fp32 rounding order (not bitwise). attn.norm still runs on the
  //    side stream for the indexer's weights_proj.
  //  - interleaved RoPE (linear_group_gemv): attn.rope into attn.q_up_proj (LinearGroupParams::rope: the CTA that
  //    computes a query head's rope columns rotates them; bitwise the GEMV then the rope kernel).
  bool gemv_fold = true;
  // LinearContext::fp8_mma_max_m (the largest batch on the FP8 tensor-core kernel; 0 disables it) and
  // LinearContext::fp8_large_m (FP8 weights above the GEMV / tensor-core range: dequantize + BF16 cuBLASLt,
  // cuBLASLt's block-scaled FP8 GEMM with x quantized per token and 128 columns, or our FP8 tensor-core GEMM with the
  // same quantization, kernels/sm90a/linear_fp8_wgmma.h, session 23). Measured per batch (S14h, S23): the mma.sync
  // kernel (x in f16) keeps batches 2..16, the FP8 tensor-core GEMM takes batch 17 and up (S23e, batch 32: 148.5 /
  // 148.0 ms against 156.1 / 155.9 with the mma.sync kernel; o_proj at m = 32 42 us against 85 in the bench).
  // Lowered below 16 with the Wgmma path, batches 2..16 run the FP8 tensor-core GEMM (token tiles of 8 / 16; x
  // quantized to e4m3), not the GEMV (session 24).
  int fp8_mma_max_m = 16;
  LinearContext::Fp8LargeM fp8_large_m = LinearContext::Fp8LargeM::Wgmma;
  // LinearContext::fp8_wgmma_stream_k: the FP8 tensor-core GEMM's work cut stream-K (every SM streams the same
  // number of W blocks; taken for token tiles of 64 / 128 where linear_fp8_wgmma_plan's cost model favours it,
  // session 24) or always split-K (whole splits per tile, session 23: o_proj's 48 row blocks on 96 SMs).
  bool fp8_wgmma_stream_k = true;
  // MoeExpertsParams::fp8_wgmma: FP8 or BF16 routed experts at batch >= 4 on the tensor cores fed by TMA
  // (kernels/sm90a/moe_fp8_wgmma.h: persistent CTAs streaming whole tiles; x and act quantized to e4m3 per 128
  // columns, or rounded to bf16) instead of the mma.sync grouped kernels (W straight into registers). Sessions 25, 26.
  bool moe_wgmma = true;
  // CUDA with a side stream (overlap): L2 prefetch of a projection's weights (kernels/l2_prefetch.h) on the side
  // stream at the start of a stretch of latency-bound kernels that keep HBM nearly idle, so that the projection
  // would read that part from L2. The fraction (0..1) of the weight bytes asked for; 0: off. Skipped when the
  // rows are not 16-byte aligned (tiny test models).
  //   o_proj: op attn.o_proj.l2_prefetch, right after attn.q_absorb; at batch 1 the indexer's score and top-k,
  //   attn.mla and attn.v_unabsorb (~45 us) run before attn.o_proj (100 MB of FP8 weights at GLM-5, ~32 us).
  //   q_up: op attn.q_up_proj.l2_prefetch (q_b and the indexer's wq_b), first on side segment 0.
  // Off by default: measured on the H200 (S14a-S14d) it did not pay. Nsight Compute showed attn.o_proj at batch 1
  // reading all 100.8 MB from DRAM (L2 hit rate 7%) with or without it, also with evict_last lines and a 30-MiB
  // persisting set-aside: the kernels in between (absorb / unabsorb weights, MLA partials, index keys, ~40 MB)
  // evict the lines first. The step got 0.1-0.5 ms slower at batch 1 (the prefetch's traffic slows attn.mla by
  // ~1.3 us per layer) and did not change at batch 8 / 32 / 128 unless joined before o_proj (o_proj_pdl above).
  double o_proj_l2_prefetch = 0.0;
  double q_up_l2_prefetch = 0.0;
  // Bytes per period of the prefetch pattern (kernels/l2_prefetch.h; 0: its 4096 default). Tuning.
  int l2_prefetch_period = 0;
  // L2PrefetchParams::evict_last for every prefetch, and the persisting L2 set-aside (MiB, device-wide:
  // cudaLimitPersistingL2CacheSize, clipped to the device's maximum; set while the engine lives and restored
  // after; 0: left as it is). Tuning (S14c).
  bool l2_prefetch_evict_last = false;
  int l2_persist_mib = 0;
  // Join the o_proj prefetch's side segment before attn.o_proj (o_proj then starts after the prefetch kernel, and
  // without its PDL launch after attn.v_unabsorb). Tuning (S14d).
  bool l2_prefetch_join = false;
};

// Why `tp` tensor/expert-parallel ranks cannot shard `c` ("--tp N must divide num_attention_heads = H"; the
// dimensions DecodeEngine divides: heads, the dense MLP's and the shared experts' intermediate size, the routed
// experts), or "" when they can. DecodeEngine throws it; profile checks it first as a usage error.
std::string tp_shard_error(const ModelConfig& c, int tp);

class DecodeEngine {
 public:
  // `weights` must live on the backend's side (Host/F32 or BF16 for CPU, Device/BF16 for CUDA) and
  // outlive the engine. Throws glm5::Error on inconsistent options or allocation failure.
  DecodeEngine(const ModelConfig& cfg, const Weights& weights, const EngineOptions& opt, OpTracer& tracer);
  ~DecodeEngine();

  KvPool& pool() { return *pool_; }
  // Which tracer sees the following steps (e.g. untraced warm-up, then CUPTI). Must outlive its use.
  void set_tracer(OpTracer& tracer) { tracer_ = &tracer; }

  // Decodes one token per request: `tokens` [batch] are appended at each request's next position.
  // Returns the greedy next token of each request; if `logits` is given it receives [batch, vocab].
  std::vector<int32_t> step(const std::vector<int32_t>& tokens, std::vector<float>* logits = nullptr);

  // Debugging aid (tests): when set, each step stores the hidden state [batch, hidden] after the
  // embedding and after every layer, then the final-normed state (HF output_hidden_states order).
  void set_hidden_capture(std::vector<std::vector<float>>* out) { capture_ = out; }

  // CUDA graphs (EngineOptions::graph): drops the captured graph so the next step captures anew
  // (e.g. after a profiler attached). captured_graph() is the current capture's record (ops and the
  // graph nodes their launches became), nullptr before the first capture or without graphs.
  void reset_graph();
  const CapturedGraph* captured_graph() const;

  // Time of the last step's device work [us]: CUDA events recorded on the engine stream around the
  // step's kernels (after the per-step uploads, before the downloads); on the CPU backend the host
  // wall time of the same span. No profiler needed: this is the untraced step time.
  double last_step_us() const { return last_step_us_; }

  int steps_done() const { return step_; }
  void set_step_index(int s) { step_ = s; }
  cudaStream_t stream() const { return stream_; }

  // Device bytes of the engine's own buffers (scratch, fused MLP weights) for `cfg` and `opt`.
  static size_t planned_scratch_bytes(const ModelConfig& cfg, const EngineOptions& opt, int64_t pool_capacity);

 private:
  struct Mat {           // a weight matrix [n, k]
    const void* p = nullptr;
    DType dt = DType::F32;
    int n = 0, k = 0;
    int ld = 0;          // elements between rows (0: k); column shards of a wider weight set it
    const float* scale = nullptr;  // F8_E4M3: 128x128 block scales of this shard's first block
    int lds = 0;                   // F8_E4M3: scale elements between block rows (0: ceil(k/128))
  };
  struct LayerWeights;

  void run_ops();        // the step's ops, embedding to sampling (no step range)
  void capture_graph();  // captures run_ops() on stream_ and instantiates it
  void attention(int layer);
  void mlp(int layer);
  // mma_pdl = false: the FP8 tensor-core path launches without PDL for this call (LinearContext::fp8_mma_pdl).
  void linear(const char* op, int layer, const float* x, const Mat& w, float* y, int m, bool accumulate,
              bool mma_pdl = true);
  // Projections of the same x (y = x W^T each, no accumulate): on CUDA, when linear_group_fused allows
  // it (FP8 GEMV shapes, batch 1), ONE launch recorded as op `fused_op` (bytes: every weight + x once +
  // every y); otherwise linear() per projection under its own op name.
  struct Proj {
    const char* op;
    const Mat* w;
    float* y;
  };
  // With `norm` (group_fold said it folds): x un-normalized, the RMSNorm folded into the GEMV
  // (LinearGroupParams::norm). With `ropes` (one RopeParams per projection, positions null where none; group_fold
  // said they fold): the RoPE of each projection's output folded in (LinearGroupParams::rope).
  void linear_group(const char* fused_op, int layer, const float* x, const std::vector<Proj>& projs, int m,
                    const InputRmsNorm* norm = nullptr, const std::vector<RopeParams>* ropes = nullptr,
                    bool admit_next_at_exit = false);  // LinearGroupParams::admit_next_at_exit (with norm)
  LinearGroupParams group_params(const float* x, const std::vector<Proj>& projs, int m) const;
  // EngineOptions::gemv_fold: which of `norm` and `ropes` (either may be null) linear_group can fold into this
  // group: the norm with CUDA, a side stream and linear_group_norm_fused; the RoPEs with CUDA, output_rope_foldable
  // for each set one and linear_group_gemv.
  struct GroupFold {
    bool norm = false, rope = false;
  };
  GroupFold group_fold(const float* x, const std::vector<Proj>& projs, int m, const InputRmsNorm* norm,
                       const std::vector<RopeParams>* ropes);
  static double linear_weight_bytes(const Mat& w);
  // On the side stream (call between side_begin / side_end): op `op` asks L2 for `fraction` of each matrix's
  // weight bytes (kernels/l2_prefetch.h). Returns false, launching nothing, without a side stream, at fraction 0,
  // or when a matrix's start or row stride is not 16-byte aligned.
  bool l2_prefetch(const char* op, int layer, const std::vector<const Mat*>& mats, double fraction);
  // Whether every matrix has a 16-byte aligned start and row stride (kernels/l2_prefetch.h's constraints).
  static bool l2_prefetchable(const std::vector<const Mat*>& mats);
  // The LinearParams of y = x W^T (+ y) for `w` (strides, block scales, the engine's activation precision).
  LinearParams linear_params(const float* x, const Mat& w, float* y, int m, bool accumulate) const;
  Mat mat(const std::string& name) const;
  const float* vec(const std::string& name) const;
  // [gate; up] rows [row0, row0 + rows) of each, stacked into one [2 rows, hidden] matrix.
  Mat fused_gate_up(const std::string& gate, const std::string& up, int row0, int rows);
  // Rows [row0, row0 + rows) of a matrix / columns [col0, col0 + cols) (ld = the full width).
  static Mat row_shard(const Mat& m, int row0, int rows);
  static Mat col_shard(const Mat& m, int col0, int cols);
  // Sums `partial` [batch, hidden] over ranks (op comm.all_reduce), then x += partial.
  void reduce_into_residual(int layer, float* partial, const char* residual_op);
  OpDesc desc(const char* op, int layer, double bytes, double flops) const;
  // The side stream (EngineOptions::overlap, CUDA): side_begin() sends the launches that follow to the side
  // stream, after all work issued so far on the main stream; side_end(k) sends them back to the main stream and
  // marks the side work so far as segment k (0, 1 or 2); side_join(k) makes the main stream wait for segment k.
  // All three do nothing without a side stream (CPU backend, overlap off).
  void side_begin();
  void side_end(int k);
  void side_join(int k);

  ModelConfig cfg_;
  const Weights& w_;
  EngineOptions opt_;
  OpTracer* tracer_;
  bool cuda_ = false;
  Where where_ = Where::Host;
  cudaStream_t stream_ = nullptr;  // the main stream: the step's order, its events, the graph capture origin
  cudaStream_t side_ = nullptr;    // EngineOptions::overlap: the side stream
  cudaStream_t launch_ = nullptr;  // where the next op's kernels go: stream_, or side_ between side_begin / side_end
  cudaEvent_t fork_ev_ = nullptr, side_ev_[3] = {nullptr, nullptr, nullptr};
  bool prefetch_unjoined_ = false;  // side segment 2 recorded since the last side_join(2)
  bool xn_ready_ = false;  // xn_ holds the next norm, written by the last MoE combine (EngineOptions::moe_combine_norm)
  bool persist_l2_set_ = false;     // EngineOptions::l2_persist_mib applied; saved_persist_l2_ restores it
  size_t saved_persist_l2_ = 0;
  std::unique_ptr<LinearContext> linear_ctx_, side_linear_ctx_;  // cuBLASLt handle + workspace per stream
  LinearContext& launch_ctx() { return launch_ == side_ && side_ ? *side_linear_ctx_ : *linear_ctx_; }
  std::unique_ptr<KvPool> pool_;
  std::vector<LayerWeights> layers_;
  std::map<const void*, Buffer> fused_;  // fused [gate; up] weights, keyed by the gate tensor
  Buffer inv_freq_;
  int step_ = 0;
  int tp_ = 1, rank_ = 0, heads_ = 0;  // tensor-parallel size, this rank, its attention heads
  double context_tokens_ = 0;   // this step: sum over requests of the tokens attended (indexer scoring)
  double selected_tokens_ = 0;  // this step: sum over requests of the top-k rows attention reads
  std::vector<std::vector<float>>* capture_ = nullptr;
  void capture(const Buffer& b);
  double last_step_us_ = 0;
  bool warmed_ = false;  // a step ran eagerly (cuBLASLt buffers sized): graph capture may begin
  struct CudaState;      // pinned token staging, step events, the captured graph
  std::unique_ptr<CudaState> cs_;

  // Activations (fp32) and index buffers, sized for `batch`.
  Buffer tokens_, x_, xn_, qa_, q_, kva_, q_lat_, o_lat_, attn_o_;
  Buffer idx_q_, idx_k_, idx_w_, scores_, topk_, compact_idx_, kv_scratch_, mla_workspace_;
  Buffer topk_flat_ws_;  // EngineOptions::topk_flat: TopkParams::flat_workspace, zeroed once (each top-k leaves it so)
  Buffer top_hist_;  // [B, kTopkHistCopies, kTopkHistBins] (EngineOptions::topk_score_hist): zero between a layer's top-k and score
  Buffer partial_;  // [batch, hidden] a rank's partial o_proj / MLP output before the all-reduce
  Buffer router_logits_, topk_ids_, topk_w_, expert_act_, moe_out_, gate_up_, act_, logits_, next_;
  Buffer moe_group_, moe_pair_out_, moe_pair_sync_, moe_combine_counters_;
  Buffer moe_wgmma_scratch_;  // MoeExpertsParams::wgmma_scratch (EngineOptions::moe_wgmma, batch >= 4, FP8 or BF16 experts)
  Buffer moe_gate_counter_;  // MoeGateParams::counter (EngineOptions::moe_gate_fused)
  Buffer xn_side_;  // the side stream's copy of mlp.norm for the shared expert (EngineOptions::moe_gate_fused)
  // CUDA MoE scratch (MoeExpertsParams): group (batch >= 4), pair_out (every batch), pair_sync (--moe-fused) and
  // combine_counters (--moe-combine-norm) below batch 4
};

}  // namespace glm5
