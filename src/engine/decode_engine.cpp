#include "engine/decode_engine.h"

#include <cstdint>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "common/error.h"
#include "kernels/attn_prologue.h"
#include "kernels/elementwise.h"
#include "kernels/indexer.h"
#include "kernels/l2_prefetch.h"
#include "kernels/kv_cache.h"
#include "kernels/kv_cast.h"
#include "kernels/linear.h"
#include "kernels/mla_absorb.h"
#include "kernels/mla_decode.h"
#include "kernels/moe.h"
#include "kernels/sm90a/moe_fp8_wgmma.h"
#include "kernels/moe_gate.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "engine/comm.h"
#include "profiler/graph_capture.h"

#include <chrono>

// Runs the op on the engine's backend: the CPU twin with host pointers or the CUDA launcher.
#define GLM5_RUN(family, params) (cuda_ ? family##_cuda((params), launch_) : family##_cpu(params))

namespace glm5 {

struct DecodeEngine::LayerWeights {
  const float *input_norm = nullptr, *post_norm = nullptr, *q_a_norm = nullptr, *kv_a_norm = nullptr;
  Mat q_a, q_b, kv_a, kv_b, o_proj;
  bool has_indexer = false, indexer_shared = false;
  Mat idx_wq_b, idx_wk, idx_wproj;
  const float *idx_norm_w = nullptr, *idx_norm_b = nullptr;
  bool moe = false;
  Mat gate_up, down;                  // dense MLP, or the shared expert for MoE layers
  Mat router;
  const float* router_bias = nullptr;
  const void *e_gate = nullptr, *e_up = nullptr, *e_down = nullptr;
  const float *e_gate_s = nullptr, *e_up_s = nullptr, *e_down_s = nullptr;  // FP8 experts' block scales
  DType e_dt = DType::F32;
  int expert_begin = 0, experts = 0;  // this rank's routed experts (expert parallel)
};

struct DecodeEngine::CudaState {
  int32_t* tokens_host = nullptr;        // pinned staging of the step's tokens [batch]
  cudaEvent_t tokens_copied = nullptr;   // their last upload
  bool tokens_pending = false;
  cudaEvent_t begin = nullptr, end = nullptr;  // around the step's device work
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::unique_ptr<CapturedGraph> record;
  explicit CudaState(int batch) {
    CUDA_CHECK(cudaMallocHost(&tokens_host, size_t(batch) * sizeof(int32_t)));
    CUDA_CHECK(cudaEventCreateWithFlags(&tokens_copied, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreate(&begin));
    CUDA_CHECK(cudaEventCreate(&end));
  }
  void drop_graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
    record.reset();
  }
  ~CudaState() {  // never throws
    drop_graph();
    if (begin) cudaEventDestroy(begin);
    if (end) cudaEventDestroy(end);
    if (tokens_copied) cudaEventDestroy(tokens_copied);
    if (tokens_host) cudaFreeHost(tokens_host);
  }
  CudaState(const CudaState&) = delete;
  CudaState& operator=(const CudaState&) = delete;
};

namespace {

double dsize(DType t) { return double(dtype_size(t)); }

// RoPE inverse frequencies, fp32.
//   default (HF compute_default_rope_parameters): inv_freq[i] = 1 / base^(2i/d).
//   yarn (HF _compute_yarn_parameters, DeepSeek-V3): blend of inv_freq (extrapolation) and inv_freq /
//   factor (interpolation) with a linear ramp between the correction dims of beta_fast and beta_slow
//   over original_max_position_embeddings. The cos/sin attention factor is 1 when mscale equals
//   mscale_all_dim (DeepSeek-V3 / R1: both 1.0); the softmax scale carries mscale^2 (ModelConfig).
std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int dim = c.qk_rope_head_dim;
  const double base = c.rope_theta;
  std::vector<float> f(dim / 2);
  for (int i = 0; i < dim / 2; ++i) f[i] = float(1.0 / std::pow(base, double(2 * i) / double(dim)));
  if (c.rope_type != "yarn" || c.rope_factor <= 1.f || c.rope_original_max_position <= 0) return f;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(c.rope_original_max_position / (rotations * 2 * M_PI)) / (2 * std::log(base));
  };
  double low = std::max(0.0, std::floor(correction_dim(c.rope_beta_fast)));
  double high = std::min(double(dim - 1), std::ceil(correction_dim(c.rope_beta_slow)));
  if (low == high) high += 0.001;
  for (int i = 0; i < dim / 2; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;  // 1: keep the original frequency
    const double inv = f[i];
    f[i] = float(inv / c.rope_factor * (1.0 - extrapolation) + inv * extrapolation);
  }
  return f;
}

}  // namespace

DecodeEngine::Mat DecodeEngine::mat(const std::string& name) const {
  const WeightTensor& t = w_.get(name);
  require(t.shape.size() == 2, "weights: " + name + " must be a matrix");
  Mat m{t.data, t.dtype, int(t.shape[0]), int(t.shape[1])};
  m.scale = t.scale_inv;
  return m;
}

const float* DecodeEngine::vec(const std::string& name) const {
  const WeightTensor& t = w_.get(name);
  require(t.dtype == DType::F32, "weights: " + name + " must be stored as F32");
  return static_cast<const float*>(t.data);
}

// [gate; up] stacked into one [2I, H] matrix so one projection feeds silu_mul (the production
// layout). Shared tensors (share_mlp_weights) are fused once.
DecodeEngine::Mat DecodeEngine::row_shard(const Mat& m, int row0, int rows) {
  Mat s = m;
  s.p = static_cast<const char*>(m.p) + size_t(row0) * (m.ld ? m.ld : m.k) * dtype_size(m.dt);
  s.n = rows;
  if (m.dt == DType::F8_E4M3) {  // FP8 shards start on a 128-row block (GLM-5 / DeepSeek shards do)
    require(row0 % kFp8WeightBlock == 0, "--tp: FP8 weight row shard at row " + std::to_string(row0) +
                                             " is not a multiple of the 128-row scale block");
    s.lds = m.lds ? m.lds : ((m.ld ? m.ld : m.k) + kFp8WeightBlock - 1) / kFp8WeightBlock;
    s.scale = m.scale + size_t(row0 / kFp8WeightBlock) * s.lds;
  }
  return s;
}

DecodeEngine::Mat DecodeEngine::col_shard(const Mat& m, int col0, int cols) {
  Mat s = m;
  s.p = static_cast<const char*>(m.p) + size_t(col0) * dtype_size(m.dt);
  s.ld = m.ld ? m.ld : m.k;
  s.k = cols;
  if (m.dt == DType::F8_E4M3) {
    require(col0 % kFp8WeightBlock == 0, "--tp: FP8 weight column shard at column " + std::to_string(col0) +
                                             " is not a multiple of the 128-column scale block");
    s.lds = m.lds ? m.lds : (s.ld + kFp8WeightBlock - 1) / kFp8WeightBlock;
    s.scale = m.scale + col0 / kFp8WeightBlock;
  }
  return s;
}

DecodeEngine::Mat DecodeEngine::fused_gate_up(const std::string& gate, const std::string& up, int row0, int rows) {
  Mat g = row_shard(mat(gate), row0, rows), u = row_shard(mat(up), row0, rows);
  require(g.dt == u.dt && g.k == u.k, "weights: " + gate + " and " + up + " differ in shape or dtype");
  const bool fp8 = g.dt == DType::F8_E4M3;
  // FP8: [gate codes; up codes] (16-byte padded) then [gate scales; up scales]: the 128-row blocks stack
  // as the rows do (g.n is a multiple of 128 for every GLM-5 / DeepSeek shard; checked).
  require(!fp8 || g.n % kFp8WeightBlock == 0, "weights: FP8 " + gate + " shard of " + std::to_string(g.n) +
                                                  " rows is not a multiple of the 128-row scale block");
  const size_t half = size_t(g.n) * g.k * dtype_size(g.dt), codes = (2 * half + 15) / 16 * 16;
  const int lds = fp8 ? (g.lds ? g.lds : (g.k + kFp8WeightBlock - 1) / kFp8WeightBlock) : 0;
  const size_t half_scales = fp8 ? size_t(g.n / kFp8WeightBlock) * lds * 4 : 0;
  auto it = fused_.find(g.p);
  if (it == fused_.end()) {
    Buffer b(where_, codes + 2 * half_scales, "fused " + gate);
    const cudaMemcpyKind kind = cudaMemcpyDeviceToDevice;
    auto copy = [&](size_t off, const void* src, size_t n) {
      if (cuda_) CUDA_CHECK(cudaMemcpy(b.as<char>() + off, src, n, kind));
      else std::memcpy(b.as<char>() + off, src, n);
    };
    copy(0, g.p, half);
    copy(half, u.p, half);
    if (fp8) {
      copy(codes, g.scale, half_scales);
      copy(codes + half_scales, u.scale, half_scales);
    }
    it = fused_.emplace(g.p, std::move(b)).first;
  }
  Mat f{it->second.data(), g.dt, 2 * g.n, g.k};
  if (fp8) {
    f.scale = reinterpret_cast<const float*>(it->second.as<char>() + codes);
    f.lds = lds;
  }
  return f;
}

size_t DecodeEngine::planned_scratch_bytes(const ModelConfig& c, const EngineOptions& o, int64_t cap) {
  size_t B = size_t(o.batch), f = 4;
  size_t floats = B * (size_t(c.hidden_size) * 4 + c.q_lora_rank + size_t(c.num_attention_heads) * c.qk_head_dim() +
                       (c.kv_lora_rank + c.qk_rope_head_dim) + 2 * size_t(c.num_attention_heads) * c.kv_lora_rank +
                       size_t(c.num_attention_heads) * c.v_head_dim + size_t(c.index_n_heads) * c.index_head_dim +
                       c.index_head_dim + c.index_n_heads + size_t(o.max_seq_len + 64) + c.n_routed_experts +
                       size_t(c.num_experts_per_tok) * (c.moe_intermediate_size + 2) +
                       3 * size_t(std::max(c.intermediate_size, c.moe_intermediate_size)) + c.vocab_size);
  size_t bytes = floats * f;
  int topk = std::max(c.index_topk, o.max_seq_len);
  const size_t row = size_t(c.kv_lora_rank) + c.qk_rope_head_dim;
  if (o.kv_path == KvPath::Cast) bytes += size_t(cap) * 2 * row;
  if (o.kv_path == KvPath::GatherCast) bytes += B * topk * 2 * row;
  bytes += mla_decode_workspace_bytes(o.batch, c.num_attention_heads, topk, c.kv_lora_rank);
  if (o.backend == Backend::Cuda && c.n_routed_experts > 0) {  // MoE per-slot outputs (+ buckets at batch >= 4)
    bytes += B * (c.num_experts_per_tok + 1) * size_t(c.hidden_size) * 4;
    if (o.batch >= kMoeGroupMinTokens) bytes += (B * c.num_experts_per_tok + c.n_routed_experts + 1) * 4;
    if (o.batch >= kMoeGroupMinTokens && o.moe_wgmma)  // an upper bound: BF16 slot rows (FP8's are half), all local
      bytes += moe_fp8_wgmma_plan(o.batch, std::max(1, c.num_experts_per_tok), c.n_routed_experts, c.n_routed_experts,
                                  c.hidden_size, c.moe_intermediate_size, 0, DType::BF16).scratch_bytes;
  }
  // fused [gate; up] copies of the dense MLP and shared expert (once when shared)
  bytes += size_t(2) * c.hidden_size * (size_t(c.intermediate_size) + size_t(c.moe_intermediate_size) * std::max(1, c.n_shared_experts)) * 2;
  return bytes;
}

std::string tp_shard_error(const ModelConfig& c, int tp) {
  for (auto [n, what] : {std::pair{int64_t(c.num_attention_heads), "num_attention_heads"},
                         std::pair{int64_t(c.intermediate_size), "intermediate_size"},
                         std::pair{int64_t(c.moe_intermediate_size) * std::max(1, c.n_shared_experts),
                                   "moe_intermediate_size x n_shared_experts"},
                         std::pair{int64_t(c.n_routed_experts), "n_routed_experts"}})
    if (n % tp != 0) return "--tp " + std::to_string(tp) + " must divide " + what + " = " + std::to_string(n);
  return "";
}

DecodeEngine::DecodeEngine(const ModelConfig& cfg, const Weights& weights, const EngineOptions& opt, OpTracer& tracer)
    : cfg_(cfg), w_(weights), opt_(opt), tracer_(&tracer) {
  cuda_ = opt.backend == Backend::Cuda;
  where_ = cuda_ ? Where::Device : Where::Host;
  require(opt.batch > 0, "engine: batch must be positive");
  require(opt.max_seq_len > 0, "engine: max sequence length must be positive");
  if (cuda_) {
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // EngineOptions::indexer_first: the main stream (the indexer's chain) above the side stream (q_b's GEMV).
    const bool main_first = opt.indexer_first && opt.overlap;
    CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, main_first ? greatest : 0));
    launch_ = stream_;
    if (opt.overlap) {
      CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking,
                                              opt.side_priority && !main_first ? greatest : least));
      CUDA_CHECK(cudaEventCreateWithFlags(&fork_ev_, cudaEventDisableTiming));
      for (cudaEvent_t& e : side_ev_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    auto make_linear_ctx = [&opt] {  // the engine's projection options (one context per stream)
      auto ctx = std::make_unique<LinearContext>();
      ctx->fp8_tma_gemv = opt.fp8_tma_gemv;
      ctx->fp8_gemv_l2_lookahead = opt.gemv_l2_lookahead;
      ctx->fp8_mma_pdl = opt.mma_pdl;
      ctx->fp8_mma_max_m = opt.fp8_mma_max_m;
      ctx->fp8_large_m = opt.fp8_large_m;
      ctx->fp8_wgmma_stream_k = opt.fp8_wgmma_stream_k;
      return ctx;
    };
    linear_ctx_ = make_linear_ctx();
    if (side_) side_linear_ctx_ = make_linear_ctx();  // its own cuBLASLt workspace: the streams overlap
    cs_ = std::make_unique<CudaState>(opt.batch);
  }
  require(!(opt.graph && opt.comm && opt.comm->kind() == "nccl"),
          "engine: --graph with NCCL collectives (--tp N on N GPUs) is not supported; use --rank R or drop --graph");
  const ModelConfig& c = cfg_;
  if (opt.comm) {
    tp_ = opt.comm->size();
    rank_ = opt.comm->rank();
  }
  const std::string shard_error = tp_shard_error(c, tp_);
  require(shard_error.empty(), shard_error);
  heads_ = c.num_attention_heads / tp_;
  const int h0 = rank_ * heads_;
  const int dense_inter = c.intermediate_size / tp_;
  const int shared_inter = c.moe_intermediate_size * std::max(1, c.n_shared_experts) / tp_;
  const int local_experts = c.n_routed_experts / tp_;
  // Resolve every layer's tensors (this rank's shard of them) once.
  layers_.resize(c.num_hidden_layers);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& L = layers_[l];
    std::string p = "model.layers." + std::to_string(l) + ".";
    L.input_norm = vec(p + "input_layernorm.weight");
    L.post_norm = vec(p + "post_attention_layernorm.weight");
    L.q_a = mat(p + "self_attn.q_a_proj.weight");
    L.q_a_norm = vec(p + "self_attn.q_a_layernorm.weight");
    L.q_b = row_shard(mat(p + "self_attn.q_b_proj.weight"), h0 * c.qk_head_dim(), heads_ * c.qk_head_dim());
    L.kv_a = mat(p + "self_attn.kv_a_proj_with_mqa.weight");
    L.kv_a_norm = vec(p + "self_attn.kv_a_layernorm.weight");
    const int kvb_rows = c.qk_nope_head_dim + c.v_head_dim;
    L.kv_b = row_shard(mat(p + "self_attn.kv_b_proj.weight"), h0 * kvb_rows, heads_ * kvb_rows);
    L.o_proj = col_shard(mat(p + "self_attn.o_proj.weight"), h0 * c.v_head_dim, heads_ * c.v_head_dim);
    L.has_indexer = c.has_indexer;
    L.indexer_shared = c.has_indexer && l < int(c.indexer_shared.size()) && c.indexer_shared[l];
    if (L.has_indexer && !L.indexer_shared) {
      L.idx_wq_b = mat(p + "self_attn.indexer.wq_b.weight");
      L.idx_wk = mat(p + "self_attn.indexer.wk.weight");
      L.idx_wproj = mat(p + "self_attn.indexer.weights_proj.weight");
      L.idx_norm_w = vec(p + "self_attn.indexer.k_norm.weight");
      L.idx_norm_b = vec(p + "self_attn.indexer.k_norm.bias");
    }
    L.moe = l < int(c.layer_is_moe.size()) && c.layer_is_moe[l];
    if (!L.moe) {
      L.gate_up = fused_gate_up(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", rank_ * dense_inter, dense_inter);
      L.down = col_shard(mat(p + "mlp.down_proj.weight"), rank_ * dense_inter, dense_inter);
    } else {
      L.router = mat(p + "mlp.gate.weight");
      L.router_bias = vec(p + "mlp.gate.e_score_correction_bias");
      const WeightTensor& g = w_.get(p + "mlp.experts.gate_proj.weight");
      L.e_dt = g.dtype;
      L.expert_begin = rank_ * local_experts;
      L.experts = local_experts;
      const size_t per_expert = size_t(c.moe_intermediate_size) * c.hidden_size * dtype_size(g.dtype);
      auto local = [&](const void* base) { return static_cast<const char*>(base) + L.expert_begin * per_expert; };
      const WeightTensor& u = w_.get(p + "mlp.experts.up_proj.weight");
      const WeightTensor& d = w_.get(p + "mlp.experts.down_proj.weight");
      L.e_gate = local(g.data);
      L.e_up = local(u.data);
      L.e_down = local(d.data);
      if (g.dtype == DType::F8_E4M3) {  // block scales per expert: [E, ceil(rows/128), ceil(cols/128)]
        auto local_s = [&](const WeightTensor& t) { return t.scale_inv + L.expert_begin * (t.scale_numel() / t.shape[0]); };
        L.e_gate_s = local_s(g);
        L.e_up_s = local_s(u);
        L.e_down_s = local_s(d);
      }
      L.gate_up = fused_gate_up(p + "mlp.shared_experts.gate_proj.weight", p + "mlp.shared_experts.up_proj.weight",
                                rank_ * shared_inter, shared_inter);
      L.down = col_shard(mat(p + "mlp.shared_experts.down_proj.weight"), rank_ * shared_inter, shared_inter);
    }
  }

  KvPoolOptions po;
  po.where = where_;
  po.fp8 = opt.kv_path != KvPath::Bf16;
  po.batch = opt.batch;
  po.max_seq_len = opt.max_seq_len;
  po.capacity_tokens = opt.pool_tokens > 0 ? opt.pool_tokens : int64_t(opt.batch) * ((opt.max_seq_len + 63) / 64 * 64);
  po.seed = opt.seed;
  pool_ = std::make_unique<KvPool>(c, po);

  auto fl = [&](size_t n, const char* label) { return Buffer(where_, std::max<size_t>(n, 1) * 4, label); };
  size_t B = opt.batch;
  const int H = heads_;
  tokens_ = fl(B, "tokens");
  x_ = fl(B * c.hidden_size, "hidden");
  xn_ = fl(B * c.hidden_size, "normed hidden");
  qa_ = fl(B * c.q_lora_rank, "q_a");
  q_ = fl(B * H * c.qk_head_dim(), "q");
  kva_ = fl(B * (c.kv_lora_rank + c.qk_rope_head_dim), "kv_a");
  q_lat_ = fl(B * H * c.kv_lora_rank, "q latent");
  o_lat_ = fl(B * H * c.kv_lora_rank, "o latent");
  attn_o_ = fl(B * H * c.v_head_dim, "attention output");
  int topk = c.has_indexer ? c.index_topk : pool_->max_pages() * kPageSize;
  int score_stride = pool_->max_pages() * kPageSize;
  if (c.has_indexer) {
    idx_q_ = fl(B * c.index_n_heads * c.index_head_dim, "indexer q");
    idx_k_ = fl(B * c.index_head_dim, "indexer k");
    idx_w_ = fl(B * c.index_n_heads, "indexer head weights");
    // The histogram only where it pays on this GPU; the CPU engine runs it when asked.
    if (opt.topk_score_hist && (!cuda_ || topk_score_hist_pays_here(B, score_stride))) {
      // EngineOptions::topk_score_hist: zero once here, then each top-k leaves it zero
      top_hist_ = Buffer(where_, size_t(B) * kTopkHistCopies * kTopkHistBins * 4, "top-k first-digit histogram");
      std::vector<uint32_t> zeros(size_t(B) * kTopkHistCopies * kTopkHistBins, 0u);
      top_hist_.upload(zeros.data(), zeros.size() * 4);
      if (opt.topk_flat && cuda_) {
        const size_t bytes = topk_flat_workspace_bytes(B, score_stride);
        topk_flat_ws_ = Buffer(where_, bytes, "top-k flat-form workspace");
        const std::vector<uint8_t> zero_bytes(bytes, 0);
        topk_flat_ws_.upload(zero_bytes.data(), bytes);
      }
    }
  }
  scores_ = fl(B * score_stride, "indexer scores");
  if (!c.has_indexer) {  // dense attention (deepseek_v3): every position scores equally, top-k keeps all
    std::vector<float> zeros(B * score_stride, 0.f);
    scores_.upload(zeros.data(), zeros.size() * 4);
  }
  topk_ = fl(B * topk, "top-k slots");
  if (opt.kv_path == KvPath::GatherCast) {
    compact_idx_ = fl(B * topk, "compact indices");
    kv_scratch_ = Buffer(where_, B * topk * 2 * (c.kv_lora_rank + c.qk_rope_head_dim), "gather-cast buffer");
  } else if (opt.kv_path == KvPath::Cast) {
    kv_scratch_ = Buffer(where_, size_t(pool_->capacity()) * 2 * (c.kv_lora_rank + c.qk_rope_head_dim),
                         "BF16 scratch pool (cast path)");
  }
  if (cuda_) {  // split-K partials of the sparse MLA decode (flash-decoding), reused by every layer
    size_t ws = mla_decode_workspace_bytes(opt.batch, H, topk, c.kv_lora_rank);
    if (ws) mla_workspace_ = Buffer(where_, ws, "MLA decode split-K workspace");
  }
  int inter = std::max(c.intermediate_size, c.moe_intermediate_size * std::max(1, c.n_shared_experts));
  router_logits_ = fl(B * std::max(1, c.n_routed_experts), "router logits");
  topk_ids_ = fl(B * std::max(1, c.num_experts_per_tok), "expert ids");
  topk_w_ = fl(B * std::max(1, c.num_experts_per_tok), "expert weights");
  // (+ B rows: the shared expert's activations when it runs fused with the routed experts)
  expert_act_ = fl(B * (std::max(1, c.num_experts_per_tok) + 1) * std::max(1, c.moe_intermediate_size),
                   "expert activations");
  moe_out_ = fl(B * c.hidden_size, "routed experts output");
  if (cuda_ && c.n_routed_experts > 0) {
    const size_t pairs = B * (std::max(1, c.num_experts_per_tok) + 1);  // + the fused shared expert
    // Buckets: batch >= 4 reads each selected expert once per step. Per-slot outputs: also the small
    // batches' FP8 down projection (moe_experts_cuda), 8 x hidden floats per token.
    if (opt.batch >= kMoeGroupMinTokens) moe_group_ = fl(c.n_routed_experts + 1 + pairs, "MoE expert buckets");
    moe_pair_out_ = fl(pairs * c.hidden_size, "MoE per-slot down projections");
    // The TMA-fed expert kernels' slot rows: FP8 or BF16 experts (BF16's 2-byte rows are the larger scratch).
    const auto experts_of = [&](DType dt) {
      return std::any_of(layers_.begin(), layers_.end(), [dt](const LayerWeights& L) { return L.moe && L.e_dt == dt; });
    };
    // (BF16 experts only with bf16 activations: EngineOptions::precision Bf16, see run_layer's MoE.)
    const bool bf16_experts = experts_of(DType::BF16) && opt.precision == ActivationPrecision::Bf16,
               fp8_experts = experts_of(DType::F8_E4M3);
    if (opt.batch >= kMoeGroupMinTokens && opt.moe_wgmma && (fp8_experts || bf16_experts) && c.hidden_size % 128 == 0 &&
        c.moe_intermediate_size % 128 == 0) {
      const MoeFp8WgmmaPlan q = moe_fp8_wgmma_plan(B, std::max(1, c.num_experts_per_tok), local_experts,
                                                   c.n_routed_experts, c.hidden_size, c.moe_intermediate_size, 0,
                                                   bf16_experts ? DType::BF16 : DType::F8_E4M3);
      moe_wgmma_scratch_ = Buffer(where_, q.scratch_bytes, "MoE wgmma slot rows");
      moe_fp8_wgmma_scratch_init(moe_wgmma_scratch_.as<uint8_t>(), q.scratch_bytes);
    }
    // Counters the kernels leave at zero after each launch: zero before the first.
    auto zeroed_ints = [&](size_t n, const char* label) {
      Buffer b = fl(n, label);
      const std::vector<int32_t> zeros(n, 0);
      b.upload(zeros.data(), n * 4);
      return b;
    };
    if (opt.batch < kMoeGroupMinTokens && opt.moe_combine_norm)  // MoeExpertsParams::combine_counters
      moe_combine_counters_ = zeroed_ints(B, "MoE combine + next norm counters");
    if (opt.batch <= 4 && opt.moe_gate_fused) {
      moe_gate_counter_ = zeroed_ints(1, "MoE gate counter");
      xn_side_ = fl(B * c.hidden_size, "side-stream MLP norm");
    }
    if (opt.batch < kMoeGroupMinTokens && opt.moe_fused)  // MoeExpertsParams::pair_sync
      moe_pair_sync_ = zeroed_ints(moe_pair_sync_ints(int(B), std::max(1, c.num_experts_per_tok)),
                                   "MoE fused pair-path sync words");
  }
  if (tp_ > 1) partial_ = fl(B * c.hidden_size, "partial output (before the all-reduce)");
  gate_up_ = fl(B * 2 * inter, "gate_up");
  act_ = fl(B * inter, "MLP activation");
  logits_ = fl(B * c.vocab_size, "logits");
  next_ = fl(B, "next tokens");

  std::vector<float> f = rope_inv_freq(c);
  inv_freq_ = fl(f.size(), "rope inv_freq");
  inv_freq_.upload(f.data(), f.size() * 4);
  // Last, so that no later step of the constructor can throw with the device-wide limit changed (the destructor,
  // which restores it, does not run for a constructor that threw).
  if (cuda_ && opt.l2_persist_mib > 0) {  // EngineOptions::l2_persist_mib
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    CUDA_CHECK(cudaDeviceGetLimit(&saved_persist_l2_, cudaLimitPersistingL2CacheSize));
    const size_t want = std::min(size_t(opt.l2_persist_mib) << 20, size_t(prop.persistingL2CacheMaxSize));
    CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, want));
    persist_l2_set_ = true;
  }
}

DecodeEngine::~DecodeEngine() {
  cs_.reset();
  if (persist_l2_set_) {
    cudaCtxResetPersistingL2Cache();
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, saved_persist_l2_);
  }
  for (cudaEvent_t e : {fork_ev_, side_ev_[0], side_ev_[1], side_ev_[2]})
    if (e) cudaEventDestroy(e);
  if (side_) cudaStreamDestroy(side_);
  if (stream_) cudaStreamDestroy(stream_);
}

void DecodeEngine::side_begin() {
  if (!side_) return;
  CUDA_CHECK(cudaEventRecord(fork_ev_, stream_));
  CUDA_CHECK(cudaStreamWaitEvent(side_, fork_ev_, 0));
  launch_ = side_;
}

void DecodeEngine::side_end(int k) {
  if (!side_) return;
  CUDA_CHECK(cudaEventRecord(side_ev_[k], side_));
  launch_ = stream_;
}

void DecodeEngine::side_join(int k) {
  if (side_) CUDA_CHECK(cudaStreamWaitEvent(stream_, side_ev_[k], 0));
}

void DecodeEngine::reset_graph() {
  if (cs_) cs_->drop_graph();
}

const CapturedGraph* DecodeEngine::captured_graph() const { return cs_ ? cs_->record.get() : nullptr; }

void DecodeEngine::capture_graph() {
  cs_->drop_graph();
  auto record = std::make_unique<CapturedGraph>();
  GraphCaptureRecorder recorder(stream_, *record, side_);
  OpTracer* outer = tracer_;
  outer->begin_graph_capture();
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  tracer_ = &recorder;
  cudaGraph_t g = nullptr;
  try {
    run_ops();
    recorder.flush();
  } catch (...) {
    tracer_ = outer;
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();  // clear a capture-invalidation error: the stream stays usable
    outer->end_graph_capture();
    throw;
  }
  tracer_ = outer;
  const cudaError_t e = cudaStreamEndCapture(stream_, &g);
  outer->end_graph_capture();
  if (e != cudaSuccess || !g)
    throw Error(std::string("engine: capturing the decode step into a CUDA graph failed: ") + cudaGetErrorName(e) +
                " (" + cudaGetErrorString(e) + ")");
  try {
    cs_->exec = instantiate_tracked(g, *record);
  } catch (...) {
    cudaGraphDestroy(g);
    throw;
  }
  cs_->graph = g;
  cs_->record = std::move(record);
}

OpDesc DecodeEngine::desc(const char* op, int layer, double bytes, double flops) const {
  return OpDesc{step_, layer, op, bytes, flops, launch_ != stream_ ? static_cast<void*>(launch_) : nullptr};
}

bool DecodeEngine::l2_prefetchable(const std::vector<const Mat*>& mats) {
  for (const Mat* m : mats) {
    const int64_t es = int64_t(dtype_size(m->dt)), stride = int64_t(m->ld ? m->ld : m->k) * es;
    if (!m->p || m->n <= 0 || m->k <= 0 || reinterpret_cast<uintptr_t>(m->p) % 16 != 0 || stride % 16 != 0)
      return false;
  }
  return true;
}

bool DecodeEngine::l2_prefetch(const char* op, int layer, const std::vector<const Mat*>& mats, double fraction) {
  if (!side_ || fraction <= 0 || !l2_prefetchable(mats)) return false;
  // No bytes of its own: the ones it fetches are the projection's (counted there, read from L2 or HBM).
  OpScope s(*tracer_, desc(op, layer, 0, 0));
  for (const Mat* m : mats) {
    const int64_t es = int64_t(dtype_size(m->dt));
    L2PrefetchParams p = l2_prefetch_plan(m->p, m->n, int64_t(m->k) * es, int64_t(m->ld ? m->ld : m->k) * es,
                                          std::min(1.0, fraction), opt_.l2_prefetch_period);
    p.evict_last = opt_.l2_prefetch_evict_last;
    GLM5_RUN(l2_prefetch, p);
  }
  return true;
}

double DecodeEngine::linear_weight_bytes(const Mat& w) {
  double bytes = double(w.n) * w.k * dsize(w.dt);
  if (w.dt == DType::F8_E4M3) bytes += double((w.n + 127) / 128) * ((w.k + 127) / 128) * 4;  // block scales
  return bytes;
}

void DecodeEngine::linear(const char* op, int layer, const float* x, const Mat& w, float* y, int m, bool accumulate,
                          bool mma_pdl) {
  const double bytes = linear_weight_bytes(w) + double(m) * w.k * 4 + double(m) * w.n * 4 * (accumulate ? 2 : 1);
  OpScope s(*tracer_, desc(op, layer, bytes, 2.0 * m * w.n * w.k));
  const LinearParams p = linear_params(x, w, y, m, accumulate);
  if (!cuda_) {
    linear_cpu(p);
    return;
  }
  LinearContext& ctx = launch_ctx();
  const bool saved = ctx.fp8_mma_pdl;
  ctx.fp8_mma_pdl = saved && mma_pdl;
  try {
    linear_cuda(p, ctx, launch_);
  } catch (...) {
    ctx.fp8_mma_pdl = saved;
    throw;
  }
  ctx.fp8_mma_pdl = saved;
}

LinearParams DecodeEngine::linear_params(const float* x, const Mat& w, float* y, int m, bool accumulate) const {
  LinearParams p{x, w.p, w.dt, y, m, w.n, w.k, accumulate, opt_.precision == ActivationPrecision::SplitBf16};
  p.ldw = w.ld;
  p.w_scale = w.scale;
  p.ld_scale = w.lds;
  return p;
}

LinearGroupParams DecodeEngine::group_params(const float* x, const std::vector<Proj>& projs, int m) const {
  LinearGroupParams g;
  g.count = int(projs.size());
  for (int i = 0; i < g.count && i < kMaxLinearGroup; ++i) g.p[i] = linear_params(x, *projs[i].w, projs[i].y, m, false);
  return g;
}

DecodeEngine::GroupFold DecodeEngine::group_fold(const float* x, const std::vector<Proj>& projs, int m,
                                                 const InputRmsNorm* norm, const std::vector<RopeParams>* ropes) {
  GroupFold f;
  if (!cuda_ || !opt_.gemv_fold || projs.empty() || projs.size() > size_t(kMaxLinearGroup)) return f;
  LinearGroupParams g = group_params(x, projs, m);
  if (norm && norm->weight && side_) {
    g.norm = *norm;
    f.norm = linear_group_norm_fused(g, launch_ctx());
    g.norm = {};
  }
  if (ropes && ropes->size() == projs.size()) {
    f.rope = linear_group_gemv(g, launch_ctx());
    for (size_t i = 0; i < ropes->size(); ++i)
      f.rope = f.rope && (!(*ropes)[i].positions || output_rope_foldable((*ropes)[i], g.p[i]));
  }
  return f;
}

void DecodeEngine::linear_group(const char* fused_op, int layer, const float* x, const std::vector<Proj>& projs, int m,
                                const InputRmsNorm* norm, const std::vector<RopeParams>* ropes,
                                bool admit_next_at_exit) {
  LinearGroupParams g = group_params(x, projs, m);
  double bytes = 0, flops = 0;
  for (int i = 0; i < g.count && i < kMaxLinearGroup; ++i) {
    const Mat& w = *projs[i].w;
    bytes += linear_weight_bytes(w) + double(m) * w.n * 4;
    flops += 2.0 * m * w.n * w.k;
  }
  if (norm || ropes) {  // the caller checked group_fold; one launch even for one projection
    const int k = projs[0].w->k;
    bytes += double(m) * k * 4;
    if (norm) {
      g.norm = *norm;
      g.admit_next_at_exit = admit_next_at_exit;
      bytes += double(k) * 4;
      flops += 4.0 * m * k;
    }
    for (size_t i = 0; ropes && i < ropes->size() && i < size_t(kMaxLinearGroup); ++i) {
      g.rope[i] = (*ropes)[i];
      if (g.rope[i].positions) flops += 6.0 * m * g.rope[i].heads * g.rope[i].rope_dim;  // as attn.rope counts
    }
    OpScope s(*tracer_, desc(fused_op, layer, bytes, flops));
    linear_group_cuda(g, launch_ctx(), launch_);
    return;
  }
  if (!cuda_ || g.count > kMaxLinearGroup || !linear_group_fused(g, launch_ctx())) {
    for (const Proj& pr : projs) linear(pr.op, layer, x, *pr.w, pr.y, m, false);
    return;
  }
  OpScope s(*tracer_, desc(fused_op, layer, bytes + double(m) * projs[0].w->k * 4, flops));
  linear_group_cuda(g, launch_ctx(), launch_);
}

std::vector<int32_t> DecodeEngine::step(const std::vector<int32_t>& tokens, std::vector<float>* logits) {
  const ModelConfig& c = cfg_;
  const int B = opt_.batch;
  require(int(tokens.size()) == B, "engine: step needs " + std::to_string(B) + " tokens, got " + std::to_string(tokens.size()));
  for (int32_t t : tokens)
    require(t >= 0 && t < c.vocab_size, "engine: token id " + std::to_string(t) + " outside the vocabulary [0, " +
                                            std::to_string(c.vocab_size) + ")");
  if (cuda_) {  // async from pinned memory: the device buffer stays where a captured graph reads it
    if (cs_->tokens_pending) CUDA_CHECK(cudaEventSynchronize(cs_->tokens_copied));
    std::copy(tokens.begin(), tokens.end(), cs_->tokens_host);
    CUDA_CHECK(cudaMemcpyAsync(tokens_.data(), cs_->tokens_host, tokens.size() * 4, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaEventRecord(cs_->tokens_copied, stream_));
    cs_->tokens_pending = true;
  } else {
    tokens_.upload(tokens.data(), tokens.size() * 4);
  }
  pool_->begin_step(stream_);
  const int topk = c.has_indexer ? c.index_topk : pool_->max_pages() * kPageSize;
  context_tokens_ = selected_tokens_ = 0;
  for (int32_t n : pool_->host_seq_lens()) {
    context_tokens_ += n;
    selected_tokens_ += std::min(n, topk);
  }
  const bool use_graph = cuda_ && opt_.graph && !capture_;
  if (use_graph && !cs_->exec && warmed_) capture_graph();
  const auto t0 = std::chrono::steady_clock::now();
  if (cuda_) CUDA_CHECK(cudaEventRecord(cs_->begin, stream_));
  {
    RangeScope step_range(*tracer_, "step." + std::to_string(step_));
    if (use_graph && cs_->exec) {
      tracer_->begin_graph_launch(step_, *cs_->record);
      const cudaError_t e = cudaGraphLaunch(cs_->exec, stream_);
      tracer_->end_graph_launch();
      if (e != cudaSuccess)
        throw Error(std::string("engine: cudaGraphLaunch of the decode step failed: ") + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
    } else {
      // Side work a previous step left unjoined (it threw between side_begin and side_join) stays ordered before
      // this step's main-stream work (eager only: a capture may not wait on events recorded outside it).
      if (side_) side_join(0), side_join(1), side_join(2);
      run_ops();
    }
  }
  if (cuda_) {
    CUDA_CHECK(cudaEventRecord(cs_->end, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, cs_->begin, cs_->end));
    last_step_us_ = double(ms) * 1e3;
  } else {
    last_step_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  warmed_ = true;
  std::vector<int32_t> next(B);
  next_.download(next.data(), size_t(B) * 4);
  if (logits) {
    logits->resize(size_t(B) * c.vocab_size);
    logits_.download(logits->data(), logits->size() * 4);
  }
  ++step_;
  return next;
}

void DecodeEngine::run_ops() {
  const ModelConfig& c = cfg_;
  const int B = opt_.batch;
  launch_ = stream_;  // a step that threw between side_begin and side_end left launch_ on the side stream
  prefetch_unjoined_ = false;  // (step() joined all side segments before an eager run; a capture records its own)
  xn_ready_ = false;
  {
    const WeightTensor& e = w_.get("model.embed_tokens.weight");
    OpScope s(*tracer_, desc("embed", -1, double(B) * c.hidden_size * (dsize(e.dtype) + 4), 0));
    EmbeddingParams p{tokens_.as<int32_t>(), e.data, e.dtype, x_.as<float>(), B, c.hidden_size};
    GLM5_RUN(embedding, p);
  }
  if (capture_) { capture_->clear(); capture(x_); }
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    RangeScope layer_range(*tracer_, "layer." + std::to_string(l));
    attention(l);
    mlp(l);
    if (capture_) capture(x_);
  }
  if (prefetch_unjoined_) side_join(2);  // the last layer's o_proj prefetch (a capture must join every branch)
  prefetch_unjoined_ = false;
  if (xn_ready_) {  // the last MoE combine wrote the final norm (EngineOptions::moe_combine_norm)
    xn_ready_ = false;
  } else {
    OpScope s(*tracer_, desc("final_norm", -1, double(B) * c.hidden_size * 8, 4.0 * B * c.hidden_size));
    NormParams p{x_.as<float>(), vec("model.norm.weight"), nullptr, xn_.as<float>(), B, c.hidden_size,
                 c.hidden_size, c.hidden_size, c.rms_norm_eps};
    GLM5_RUN(rmsnorm, p);
  }
  if (capture_) capture(xn_);
  linear("lm_head", -1, xn_.as<float>(), mat("lm_head.weight"), logits_.as<float>(), B, false);
  {
    OpScope s(*tracer_, desc("sample", -1, double(B) * c.vocab_size * 4, 0));
    ArgmaxParams p{logits_.as<float>(), next_.as<int32_t>(), B, c.vocab_size};
    GLM5_RUN(argmax, p);
  }
}

void DecodeEngine::capture(const Buffer& b) {
  if (cuda_) CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<float> v(size_t(opt_.batch) * cfg_.hidden_size);
  b.download(v.data(), v.size() * 4);
  capture_->push_back(std::move(v));
}

void DecodeEngine::attention(int l) {
  const ModelConfig& c = cfg_;
  const LayerWeights& L = layers_[l];
  const int B = opt_.batch, H = heads_, Lr = c.kv_lora_rank, R = c.qk_rope_head_dim;
  const int qk = c.qk_head_dim(), kvw = Lr + R;
  float* x = x_.as<float>();
  float* xn = xn_.as<float>();
  const LatentLayout& lay = pool_->latent_layout();
  const bool run_indexer = L.has_indexer && !L.indexer_shared;
  const int Hi = c.index_n_heads, D = c.index_head_dim;
  std::vector<Proj> qkv_a = {{"attn.q_a_proj", &L.q_a, qa_.as<float>()}, {"attn.kv_a_proj", &L.kv_a, kva_.as<float>()}};
  if (run_indexer) qkv_a.push_back({"attn.indexer.wk", &L.idx_wk, idx_k_.as<float>()});
  // EngineOptions::gemv_fold: attn.norm inside attn.qkv_a_proj; it then runs on the side stream only for the
  // indexer's weights_proj (side segment 0, off the main chain).
  const InputRmsNorm in_norm{L.input_norm, c.rms_norm_eps};
  const bool fuse_in_norm = !xn_ready_ && group_fold(x, qkv_a, B, &in_norm, nullptr).norm;
  auto run_attn_norm = [&] {
    OpScope s(*tracer_, desc("attn.norm", l, double(B) * c.hidden_size * 8, 4.0 * B * c.hidden_size));
    NormParams p{x, L.input_norm, nullptr, xn, B, c.hidden_size, c.hidden_size, c.hidden_size, c.rms_norm_eps};
    GLM5_RUN(rmsnorm, p);
  };
  if (xn_ready_) {  // the previous layer's MoE combine wrote this norm (EngineOptions::moe_combine_norm)
    xn_ready_ = false;
  } else if (!fuse_in_norm) {
    run_attn_norm();
  }
  // The three projections of the normalized hidden state (and the indexer's key and head weights),
  // then one fused launch for the per-token work before the up projections (attn_prologue.h: the
  // q_a / kv_a RMSNorms, the key's RoPE, the KV pool write and the indexer key's LayerNorm, RoPE and
  // write; 8 kernels of ~3 us at batch 1 before), then q_b (and the indexer's wq_b) and one RoPE
  // launch for the query heads and the indexer's query heads.
  // q_a, kv_a and the indexer's wk read the same xn: one launch where the FP8 GEMV runs them
  // (attn.qkv_a_proj; linear_group_fused), else one op each.
  if (run_indexer || (side_ && opt_.q_up_l2_prefetch > 0)) {  // side segment 0: first needed by attn.indexer.score
    side_begin();
    if (opt_.q_up_l2_prefetch > 0) {  // EngineOptions::q_up_l2_prefetch: ahead of attn.q_up_proj's weights
      std::vector<const Mat*> mats = {&L.q_b};
      if (run_indexer) mats.push_back(&L.idx_wq_b);
      l2_prefetch("attn.q_up_proj.l2_prefetch", l, mats, opt_.q_up_l2_prefetch);
    }
    if (run_indexer) {
      if (fuse_in_norm) run_attn_norm();
      linear("attn.indexer.weights_proj", l, xn, L.idx_wproj, idx_w_.as<float>(), B, false);
    }
    side_end(0);
  }
  if (fuse_in_norm)
    linear_group("attn.qkv_a_proj", l, x, qkv_a, B, &in_norm, nullptr, opt_.qkv_a_admit_at_exit);
  else
    linear_group("attn.qkv_a_proj", l, xn, qkv_a, B);
  // EngineOptions::gemv_fold: attn.q_a_norm inside attn.q_up_proj (only with the side stream, where the q part
  // of the prologue is its own launch; q_a_ then stays un-normalized: the q_up group is its only reader).
  const InputRmsNorm q_norm{L.q_a_norm, c.mla_norm_eps};
  // EngineOptions::gemv_fold: the query heads' RoPE (and the indexer's) inside attn.q_up_proj too, where it runs as
  // one GEMV (batch 1) and the RoPE is interleaved (GLM-5); attn.rope then launches nothing.
  const RopeParams q_rope{q_.as<float>(), pool_->positions(), inv_freq_.as<float>(), B, H, H * qk, qk,
                          c.qk_nope_head_dim, R, c.rope_interleave, 1.f};
  const RopeParams idx_rope{idx_q_.as<float>(), pool_->positions(), inv_freq_.as<float>(), B, Hi, Hi * D, D, 0, R,
                            c.indexer_rope_interleave, 1.f};
  const Proj q_b_proj{"attn.q_b_proj", &L.q_b, q_.as<float>()};
  const Proj idx_wq_b_proj{"attn.indexer.wq_b", &L.idx_wq_b, idx_q_.as<float>()};
  // EngineOptions::indexer_first: the indexer's chain (prologue, its wq_b as its own GEMV, score, top-k) on the main
  // stream, attn.q_up_proj (q_b alone) and the absorption forked on the side stream. Only where both GEMVs fold the
  // q_a RMSNorm (q_a_ is then read-only: no in-place norm racing the other GEMV) and their RoPE; else the one q_up
  // group as before.
  const std::vector<Proj> idx_up = {idx_wq_b_proj};
  const std::vector<RopeParams> idx_ropes = {idx_rope};
  bool idx_first = false;
  if (opt_.indexer_first && side_ && run_indexer) {
    const std::vector<RopeParams> q_only = {q_rope};
    const GroupFold qf = group_fold(qa_.as<float>(), {q_b_proj}, B, &q_norm, &q_only);
    const GroupFold xf = group_fold(qa_.as<float>(), idx_up, B, &q_norm, &idx_ropes);
    idx_first = qf.norm && qf.rope && xf.norm && xf.rope;
  }
  std::vector<Proj> q_up = {q_b_proj};
  std::vector<RopeParams> q_ropes = {q_rope};
  if (run_indexer && !idx_first) {
    q_up.push_back(idx_wq_b_proj);
    q_ropes.push_back(idx_rope);
  }
  const GroupFold q_fold = group_fold(qa_.as<float>(), q_up, B, &q_norm, &q_ropes);
  const bool fuse_q_norm = q_fold.norm, fuse_rope = q_fold.rope;
  // The DSA indexer's score kernel and the top-k (or, without an indexer, the positions turned into pool slots): after
  // attn.q_up_proj, or (EngineOptions::indexer_first) after the prologue and the indexer's own wq_b.
  const int score_stride = pool_->max_pages() * kPageSize;
  const int topk = c.has_indexer ? c.index_topk : score_stride;
  const double ctx_tokens = context_tokens_;
  auto run_score = [&] {
    const IndexerLayout& il = pool_->indexer_layout();
    OpScope s(*tracer_, desc("attn.indexer.score", l, ctx_tokens * il.bytes_per_token() + double(B) * score_stride * 4,
                            2.0 * ctx_tokens * Hi * D));
    IndexerScoreParams p{idx_q_.as<float>(), idx_w_.as<float>(), 1.f / std::sqrt(float(Hi)), pool_->indexer(l), il,
                         pool_->block_table(), pool_->max_pages(), pool_->seq_lens(), scores_.as<float>(), B, Hi,
                         1.f / std::sqrt(float(D))};
    p.fresh = opt_.score_early_keys ? 1 : 0;  // one new token per request this step (its key: attn.prologue)
    p.top_hist = top_hist_.as<unsigned>();    // null unless EngineOptions::topk_score_hist; read by the top-k below
    GLM5_RUN(indexer_score, p);
  };
  auto run_absorb = [&] {
    OpScope s(*tracer_, desc("attn.q_absorb", l, double(H) * c.qk_nope_head_dim * Lr * dsize(L.kv_b.dt),
                            2.0 * B * H * c.qk_nope_head_dim * Lr));
    MlaAbsorbParams p{q_.as<float>(), L.kv_b.p, L.kv_b.dt, q_lat_.as<float>(), B, H, c.qk_nope_head_dim,
                      c.v_head_dim, Lr, qk, opt_.absorb_tc};
    GLM5_RUN(mla_absorb, p);
  };
  auto run_topk = [&] {
    // Without an indexer (deepseek_v3) every scores entry is 0 and top-k keeps all positions: the op
    // only turns positions into pool slots.
    OpScope s(*tracer_, desc(c.has_indexer ? "attn.indexer.topk" : "attn.kv_indices", l,
                             double(B) * score_stride * 4 + double(B) * topk * 4, 0));
    TopkParams p{scores_.as<float>(), score_stride, pool_->seq_lens(), pool_->block_table(), pool_->max_pages(),
                 topk_.as<int32_t>(), B, topk, opt_.topk_cluster};
    p.gather = opt_.topk_gather;
    if (run_indexer) p.top_hist = top_hist_.as<unsigned>();  // built by this layer's score kernel (or null)
    if (run_indexer && topk_flat_ws_.data()) {
      p.flat_workspace = topk_flat_ws_.data();
      p.flat_workspace_bytes = topk_flat_ws_.bytes();
    }
    GLM5_RUN(topk, p);
  };
  {
    AttnPrologueParams p;
    p.q_a_norm = {qa_.as<float>(), L.q_a_norm, nullptr, qa_.as<float>(), B, c.q_lora_rank, c.q_lora_rank,
                  c.q_lora_rank, c.mla_norm_eps};
    p.kv_a_norm = {kva_.as<float>(), L.kv_a_norm, nullptr, kva_.as<float>(), B, Lr, kvw, kvw, c.mla_norm_eps};
    p.k_rope = {kva_.as<float>(), pool_->positions(), inv_freq_.as<float>(), B, 1, kvw, kvw, Lr, R,
                c.rope_interleave, 1.f};
    p.kv_write = {kva_.as<float>(), kva_.as<float>() + Lr, kvw, kvw, pool_->new_slots(), pool_->latent(l), lay, B};
    p.slim = opt_.prologue_slim;
    double bytes = double(B) * (c.q_lora_rank + kvw) * 8 + double(B) * lay.row_bytes;
    if (run_indexer) {
      const IndexerLayout& il = pool_->indexer_layout();
      p.indexer = true;
      p.idx_k_norm = {idx_k_.as<float>(), L.idx_norm_w, L.idx_norm_b, idx_k_.as<float>(), B, D, D, D, 1e-6f};
      p.idx_k_rope = {idx_k_.as<float>(), pool_->positions(), inv_freq_.as<float>(), B, 1, D, D, 0, R,
                      c.indexer_rope_interleave, 1.f};
      p.idx_k_write = {idx_k_.as<float>(), pool_->new_slots(), pool_->indexer(l), il, B};
      bytes += double(B) * (D * 8 + il.bytes_per_token());
    }
    const double q_bytes = double(B) * c.q_lora_rank * 8;
    auto run_prologue_rest = [&] {  // the KV and indexer-key parts alone (the q_a RMSNorm is folded or its own op)
      OpScope s(*tracer_, desc("attn.prologue", l, bytes - q_bytes, 4.0 * B * Lr + 6.0 * B * R));
      AttnPrologueParams rest = p;
      rest.q_part = false;
      GLM5_RUN(attn_prologue, rest);
    };
    if (idx_first) {
      // EngineOptions::indexer_first. Side segment 1 forked at qkv_a's end: q_b (norm and RoPE folded), then the
      // absorption (joined before attn.mla). The main stream: the KV / indexer-key prologue, the indexer's wq_b, its
      // score (after side segment 0: weights_proj) and top-k, each launched under its predecessor (PDL), so that
      // their blocks are placed before q_b's fill the GPU (the main stream at the highest priority, the side at the
      // lowest: the engine's constructor).
      side_begin();
      linear_group("attn.q_up_proj", l, qa_.as<float>(), q_up, B, &q_norm, &q_ropes);
      run_absorb();
      side_end(1);
      run_prologue_rest();
      linear_group("attn.indexer.wq_b", l, qa_.as<float>(), idx_up, B, &q_norm, &idx_ropes);
      side_join(0);
      run_score();
      run_topk();
    } else if (side_) {
      // EngineOptions::overlap: the q_a RMSNorm (what attn.q_up_proj waits for) alone on the main stream, the KV
      // and indexer-key parts on the side stream (segment 0, joined before attn.indexer.score, the KV path and
      // attn.mla). The same bits as the one launch (gpu_attn_prologue).
      side_begin();
      run_prologue_rest();
      side_end(0);
      if (!fuse_q_norm) {
        OpScope s(*tracer_, desc("attn.q_a_norm", l, q_bytes, 4.0 * B * c.q_lora_rank));
        GLM5_RUN(rmsnorm, p.q_a_norm);
      }
    } else {
      OpScope s(*tracer_, desc("attn.prologue", l, bytes, 4.0 * B * (c.q_lora_rank + Lr) + 6.0 * B * R));
      GLM5_RUN(attn_prologue, p);
    }
  }
  // q_b and the indexer's wq_b both up-project the normalized q latent: attn.q_up_proj when fused.
  if (!idx_first)
    linear_group("attn.q_up_proj", l, qa_.as<float>(), q_up, B, fuse_q_norm ? &q_norm : nullptr,
                 fuse_rope ? &q_ropes : nullptr);
  // Side segment 1: the query absorption reads q_'s nope columns, which attn.rope does not touch, and is first
  // needed by attn.mla. Forked here, or (EngineOptions::absorb_after_score, with an indexer) after
  // attn.indexer.score, so that it runs beside the top-k's few blocks instead of beside the score kernel.
  // (EngineOptions::indexer_first: already in side segment 1, after q_b.)
  auto q_absorb = [&] {
    side_begin();
    run_absorb();
    side_end(1);
  };
  const bool absorb_late = opt_.absorb_after_score && side_ && run_indexer;
  if (!absorb_late && !idx_first) q_absorb();
  // Side segment 2 (EngineOptions::o_proj_l2_prefetch): part of o_proj's weights asked into L2 while the indexer,
  // attn.mla and attn.v_unabsorb keep HBM nearly idle. Not joined before attn.o_proj unless l2_prefetch_join: it
  // writes nothing, and a second dependency there would cost o_proj its programmatic (PDL) launch after
  // attn.v_unabsorb where it has one (batch 1's GEMV; the tensor-core path runs without PDL by default,
  // o_proj_pdl). The side stream runs in order, so the next joined side segment (this layer's moe.shared, the next
  // layer's segment 0) implies it; run_ops() joins the step's last one (prefetch_unjoined_). No segment at all when
  // the rows cannot be prefetched: a capture must not end with a fork nobody joins.
  if (side_ && opt_.o_proj_l2_prefetch > 0 && l2_prefetchable({&L.o_proj})) {
    side_begin();
    l2_prefetch("attn.o_proj.l2_prefetch", l, {&L.o_proj}, opt_.o_proj_l2_prefetch);
    side_end(2);
    prefetch_unjoined_ = true;
  }
  if (!fuse_rope) {
    const double heads = H + (q_ropes.size() > 1 ? Hi : 0);
    OpScope s(*tracer_, desc("attn.rope", l, double(B) * heads * R * 8, 6.0 * B * heads * R));
    if (q_ropes.size() > 1) {
      Rope2Params p{q_ropes[0], q_ropes[1]};
      GLM5_RUN(rope2, p);
    } else {
      GLM5_RUN(rope, q_ropes[0]);
    }
  }
  if (run_indexer && !idx_first) {
    side_join(0);
    run_score();
  }
  if (absorb_late && !idx_first) q_absorb();
  if (!L.indexer_shared && !idx_first) run_topk();
  side_join(0);  // the new token's KV row (attn.prologue on the side stream) before the KV path reads the pool
  // The KV path: how the selected rows reach attention.
  const uint8_t* kv = pool_->latent(l);
  LatentLayout kv_layout = lay;
  const int32_t* indices = topk_.as<int32_t>();
  const double selected = selected_tokens_;
  const double bf16_row = 2.0 * kvw;
  if (opt_.kv_path == KvPath::Cast) {
    OpScope s(*tracer_, desc("attn.kv_cast", l, double(pool_->capacity()) * (lay.row_bytes + bf16_row), 0));
    KvCastParams p{pool_->latent(l), lay, kv_scratch_.as<uint16_t>(), pool_->capacity()};
    GLM5_RUN(kv_cast, p);
    kv = kv_scratch_.as<uint8_t>();
    kv_layout = bf16_layout_of(lay);
  } else if (opt_.kv_path == KvPath::GatherCast) {
    OpScope s(*tracer_, desc("attn.kv_gather_cast", l, selected * (lay.row_bytes + bf16_row) + double(B) * topk * 8, 0));
    KvGatherCastParams p{pool_->latent(l), lay, topk_.as<int32_t>(), kv_scratch_.as<uint16_t>(),
                         compact_idx_.as<int32_t>(), int64_t(B) * topk};
    GLM5_RUN(kv_gather_cast, p);
    kv = kv_scratch_.as<uint8_t>();
    kv_layout = bf16_layout_of(lay);
    indices = compact_idx_.as<int32_t>();
  }
  side_join(1);
  {
    double bytes = selected * kv_layout.row_bytes + double(B) * H * (Lr + R + Lr) * 4 + double(B) * topk * 4;
    OpScope s(*tracer_, desc("attn.mla", l, bytes, selected * H * (2.0 * kvw + 2.0 * Lr)));
    MlaDecodeParams p{q_lat_.as<float>(), q_.as<float>() + c.qk_nope_head_dim, H * qk, qk, kv, kv_layout, indices,
                      o_lat_.as<float>(), nullptr, B, H, topk, c.softmax_scale(),
                      mla_workspace_.as<float>(), mla_workspace_.bytes()};
    p.fp8_bf16_operands = opt_.mla_fp8_bf16_operands;
    if (opt_.unabsorb_l2_prefetch && L.kv_b.dt == DType::BF16) {  // W_UV[h]: rows h (nope + v) + nope .. + v of kv_b
      const int64_t row = int64_t(Lr) * 2;
      p.l2_prefetch = static_cast<const uint8_t*>(L.kv_b.p) + int64_t(c.qk_nope_head_dim) * row;
      p.l2_prefetch_head_bytes = int64_t(c.v_head_dim) * row;
      p.l2_prefetch_head_stride = int64_t(c.qk_nope_head_dim + c.v_head_dim) * row;
      p.l2_prefetch_loads = opt_.unabsorb_l2_prefetch_loads;
    }
    GLM5_RUN(mla_decode, p);
  }
  {
    OpScope s(*tracer_, desc("attn.v_unabsorb", l, double(H) * c.v_head_dim * Lr * dsize(L.kv_b.dt),
                            2.0 * B * H * c.v_head_dim * Lr));
    MlaUnabsorbParams p{o_lat_.as<float>(), L.kv_b.p, L.kv_b.dt, attn_o_.as<float>(), B, H, c.qk_nope_head_dim,
                        c.v_head_dim, Lr, opt_.absorb_tc};
    GLM5_RUN(mla_unabsorb, p);
  }
  if (opt_.l2_prefetch_join && prefetch_unjoined_) {  // EngineOptions::l2_prefetch_join
    side_join(2);
    prefetch_unjoined_ = false;
  }
  // o_proj accumulates into the residual stream: x += attn_o W_o^T (summed over ranks under --tp).
  if (tp_ == 1) {
    linear("attn.o_proj", l, attn_o_.as<float>(), L.o_proj, x, B, true, opt_.o_proj_pdl);
  } else {
    linear("attn.o_proj", l, attn_o_.as<float>(), L.o_proj, partial_.as<float>(), B, false, opt_.o_proj_pdl);
    reduce_into_residual(l, partial_.as<float>(), "attn.residual");
  }
}

void DecodeEngine::mlp(int l) {
  const ModelConfig& c = cfg_;
  const LayerWeights& L = layers_[l];
  const int B = opt_.batch, Hd = c.hidden_size;
  float* x = x_.as<float>();
  float* xn = xn_.as<float>();
  const NormParams norm{x, L.post_norm, nullptr, xn, B, Hd, Hd, Hd, c.rms_norm_eps};
  // EngineOptions::moe_gate_fused: mlp.norm, moe.router and moe.route as one launch (kernels/moe_gate.h).
  MoeGateParams gate;
  if (L.moe) {
    gate.norm = norm;
    gate.router = linear_params(xn, L.router, router_logits_.as<float>(), B, false);
    gate.route = {router_logits_.as<float>(), L.router_bias, topk_ids_.as<int32_t>(), topk_w_.as<float>(), B,
                  c.n_routed_experts, c.num_experts_per_tok, c.n_group, c.topk_group, c.norm_topk_prob,
                  c.routed_scaling_factor};
    gate.counter = moe_gate_counter_.data() ? moe_gate_counter_.as<int32_t>() : nullptr;
  }
  const bool fused_gate = L.moe && cuda_ && opt_.moe_gate_fused && moe_gate_fusable(gate);
  if (!fused_gate) {
    OpScope s(*tracer_, desc("mlp.norm", l, double(B) * Hd * 8, 4.0 * B * Hd));
    GLM5_RUN(rmsnorm, norm);
  }
  const char* pre = L.moe ? "moe.shared" : "mlp";
  const int inter = L.gate_up.n / 2;
  // The shared expert inside the routed launches (EngineOptions::fuse_shared_expert): CUDA, FP8, the
  // per-token path (batch < 4), dense unsharded weights of the routed experts' intermediate size.
  // Dense: rows k apart, scale rows ceil(k / 128) apart (a --tp 1 "shard" sets ld = k explicitly).
  auto dense = [](const Mat& m) { return (m.ld == 0 || m.ld == m.k) && (m.lds == 0 || m.lds == (m.k + 127) / 128); };
  const bool fuse_shared = L.moe && cuda_ && opt_.fuse_shared_expert && B < kMoeGroupMinTokens &&
                           L.e_dt == DType::F8_E4M3 && L.gate_up.dt == DType::F8_E4M3 && L.down.dt == DType::F8_E4M3 &&
                           inter == c.moe_intermediate_size && inter % 128 == 0 && dense(L.gate_up) && dense(L.down) &&
                           c.hidden_size % 16 == 0;
  if (L.moe) {
    const int E = c.n_routed_experts, K = c.num_experts_per_tok, I = c.moe_intermediate_size;
    MoeExpertsParams p{xn, topk_ids_.as<int32_t>(), topk_w_.as<float>(), L.e_gate, L.e_up, L.e_down, L.e_dt,
                       L.e_gate_s, L.e_up_s, L.e_down_s,
                       expert_act_.as<float>(), moe_out_.as<float>(), B, L.experts, K, Hd, I, L.expert_begin, E};
    p.group = moe_group_.as<int32_t>();
    p.pair_out = moe_pair_out_.as<float>();
    // BF16 experts round x and act to bf16 on this path, so only where the projections' activations are bf16 too
    // (EngineOptions::precision Bf16, what `profile` measures); SplitBf16 keeps the mma.sync kernels' hi + lo split.
    p.fp8_wgmma = opt_.moe_wgmma && (L.e_dt == DType::F8_E4M3 || opt_.precision == ActivationPrecision::Bf16);
    p.wgmma_scratch = moe_wgmma_scratch_.as<uint8_t>();  // null unless allocated (batch >= 4, FP8 experts)
    p.wgmma_scratch_bytes = moe_wgmma_scratch_.bytes();
    p.down_early_loads = opt_.moe_down_early ? 1 : 0;
    p.shared_late_trigger = opt_.moe_shared_late ? 1 : 0;
    p.pair_sync = moe_pair_sync_.as<int32_t>();  // null unless EngineOptions::moe_fused at batch < 4
    if (fuse_shared) {
      p.shared_gate_up = L.gate_up.p;
      p.s_shared_gate_up = L.gate_up.scale;
      p.shared_down = L.down.p;
      p.s_shared_down = L.down.scale;
      // The combine adds into the residual stream x when no all-reduce sits between (--tp 1): one launch
      // fewer per layer, the same bits (x + (routed + shared) either way). (Also summing the slots in the
      // down launch's last CTA per row block, with tile counters, was measured and not kept: 108.6 -> 112.0 us
      // per call in isolation and +9 us per layer in the step on the H200, S10f: each of its 1,728 CTAs
      // then pays a fence and an atomic.)
      if (tp_ == 1) {
        p.out = x;
        p.accumulate = true;
        // EngineOptions::moe_combine_norm: the combine also writes the next RMSNorm of x (the next layer's
        // attn.norm, or the final norm after the last layer) into xn, and that op's own launch is skipped. xn is
        // this MoE's input: every reader of it (router, gate_up, the shared expert's pairs) runs before the combine.
        // (The weight looked up only with the option on: the final norm's is a by-name lookup, on every layer.)
        const float* nw = !moe_combine_counters_.data() ? nullptr
                          : l + 1 == c.num_hidden_layers ? vec("model.norm.weight")
                                                         : layers_[l + 1].input_norm;
        if (nw && Hd % 4 == 0 && Hd <= 16384 && reinterpret_cast<uintptr_t>(nw) % 16 == 0) {
          p.next_norm_weight = nw;  // (16-byte aligned: the separate norm would take its vector path, the same bits)
          p.next_norm_out = xn_.as<float>();
          p.next_norm_eps = c.rms_norm_eps;
          p.combine_counters = moe_combine_counters_.as<int32_t>();
        }
      }
    }
    // EngineOptions::overlap: the fused shared expert's pairs (they need no routing) run on the side stream while
    // the router and the routing run on the main stream; the routed pairs follow on the main stream and the slot
    // combine waits for both (MoeExpertsParams::Stage: the same bits as one launch sequence).
    const bool shared_aside = fuse_shared && side_;
    const double shared_bytes = 3.0 * Hd * I * dsize(L.e_dt);  // the shared expert's weights, read once
    auto run_gate = [&] {
      const double router_bytes = linear_weight_bytes(L.router) + double(B) * Hd * 4 + double(B) * E * 4;
      OpScope s(*tracer_, desc("moe.router", l, double(B) * Hd * 8 + router_bytes + double(B) * K * 8,
                               4.0 * B * Hd + 2.0 * B * E * Hd));
      moe_gate_cuda(gate, launch_);
    };
    // With the fused gate the shared expert does not wait for it: the side stream runs its own copy of mlp.norm
    // (the same bits, into xn_side_) right after attn.o_proj, so the shared expert's weights stream while the gate
    // runs (S20b: forked after the gate instead, the shared expert's CTAs found the SMs full of the routed experts'
    // and ran ~40 us later, after them: +0.4 ms per step).
    if (fused_gate && !shared_aside) run_gate();
    if (shared_aside) {
      side_begin();
      MoeExpertsParams ps = p;
      if (fused_gate) {
        OpScope s(*tracer_, desc("mlp.norm", l, double(B) * Hd * 8, 4.0 * B * Hd));
        NormParams side_norm = norm;
        side_norm.y = xn_side_.as<float>();
        GLM5_RUN(rmsnorm, side_norm);
        ps.x = side_norm.y;
      }
      {
        OpScope s(*tracer_, desc("moe.shared", l, shared_bytes + double(B) * Hd * 4, 2.0 * 3.0 * B * Hd * I));
        ps.stage = MoeExpertsParams::Stage::Shared;
        GLM5_RUN(moe_experts, ps);
      }
      side_end(0);
      if (fused_gate) run_gate();
    }
    if (!fused_gate) {
      linear("moe.router", l, xn, L.router, router_logits_.as<float>(), B, false);
      OpScope s(*tracer_, desc("moe.route", l, double(B) * E * 4, 0));
      MoeRouteParams route = gate.route;
      route.rank_form = opt_.moe_route_rank;
      GLM5_RUN(moe_route, route);
    }
    {
      // Expected share of the B*K routed slots on this rank's experts: 1 / tp. Weight bytes: each distinct
      // expert the batch selects is read once (the grouped kernels read an expert's rows once for all its
      // tokens), E_local (1 - (1 - K/E)^B) of them under uniform routing, as the step floor counts them
      // (step_floor.h). Counting B*K slots instead overstated the bytes ~4x at batch 128 and showed the
      // slow BF16 grouped kernels at 107% of copy (S9c).
      double slots = double(B) * K / tp_;
      const double distinct = double(L.experts) * (1.0 - std::pow(1.0 - double(K) / E, double(B)));
      // x read + out written (the out write and the residual read go to the combine's op when it runs apart).
      double bytes = distinct * 3.0 * Hd * I * dsize(L.e_dt) + double(B) * Hd * (shared_aside ? 4 : 8);
      if (fuse_shared && !shared_aside) slots += B, bytes += shared_bytes;
      if (fuse_shared && tp_ == 1 && !shared_aside) bytes += double(B) * Hd * 4;  // the residual add fused in: x read
      OpScope s(*tracer_, desc("moe.experts", l, bytes, 2.0 * 3.0 * slots * Hd * I));
      p.stage = shared_aside ? MoeExpertsParams::Stage::Routed : MoeExpertsParams::Stage::All;
      GLM5_RUN(moe_experts, p);
    }
    if (shared_aside) {
      side_join(0);
      // out written (+ x read for the residual at --tp 1); K + 1 multiply-adds per output (the slots, the shared
      // expert's add) and the residual add.
      OpScope s(*tracer_, desc("moe.experts", l, double(B) * Hd * (tp_ == 1 ? 8 : 4), double(B) * Hd * (2.0 * K + (tp_ == 1 ? 2 : 1))));
      p.stage = MoeExpertsParams::Stage::Combine;
      GLM5_RUN(moe_experts, p);
    }
    if (fuse_shared) {
      if (tp_ > 1) reduce_into_residual(l, moe_out_.as<float>(), "moe.residual");
      xn_ready_ = p.next_norm_weight != nullptr;
      return;
    }
  }
  std::string gu = std::string(pre) + ".gate_up", dn = std::string(pre) + ".down", ac = std::string(pre) + ".act";
  linear(gu.c_str(), l, xn, L.gate_up, gate_up_.as<float>(), B, false);
  {
    OpScope s(*tracer_, desc(ac.c_str(), l, double(B) * inter * 12, 4.0 * B * inter));
    SiluMulParams p{gate_up_.as<float>(), act_.as<float>(), B, inter};
    GLM5_RUN(silu_mul, p);
  }
  if (L.moe) {
    // HF order: (routed experts + shared expert), then the residual; summed over ranks under --tp.
    linear(dn.c_str(), l, act_.as<float>(), L.down, moe_out_.as<float>(), B, true);
    reduce_into_residual(l, moe_out_.as<float>(), "moe.residual");
  } else if (tp_ == 1) {
    linear(dn.c_str(), l, act_.as<float>(), L.down, x, B, true);
  } else {
    linear(dn.c_str(), l, act_.as<float>(), L.down, partial_.as<float>(), B, false);
    reduce_into_residual(l, partial_.as<float>(), "mlp.residual");
  }
}

void DecodeEngine::reduce_into_residual(int l, float* partial, const char* residual_op) {
  const int B = opt_.batch, Hd = cfg_.hidden_size;
  if (tp_ > 1) {
    // Ring all-reduce moves 2 (N-1)/N of the buffer through each GPU's links.
    const double bytes = 2.0 * (tp_ - 1) / tp_ * double(B) * Hd * 4;
    OpScope s(*tracer_, desc("comm.all_reduce", l, bytes, double(B) * Hd * (tp_ - 1)));
    opt_.comm->all_reduce_sum(partial, size_t(B) * Hd, stream_);
  }
  OpScope s(*tracer_, desc(residual_op, l, double(B) * Hd * 12, double(B) * Hd));
  AddParams p{x_.as<float>(), partial, int64_t(B) * Hd};
  GLM5_RUN(add_inplace, p);
}

}  // namespace glm5
