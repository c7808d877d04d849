// Weights: every tensor the engine reads, by HuggingFace name, on the host (CPU backend) or on the
// GPU (CUDA backend). Filled from a safetensors checkpoint or from seeded synthetic values.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/dtype.h"
#include "model/config.h"

namespace glm5 {

// A tensor the config implies: HF name and shape (row-major, nn.Linear weights are [out, in]).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor of the checkpoint the engine reads for `cfg`, with the shape the config implies,
// in HF naming: model.embed_tokens.weight, model.layers.N.self_attn.q_a_proj.weight, ...,
// model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight (per expert), lm_head.weight.
std::vector<TensorSpec> expected_tensors(const ModelConfig& cfg);

// One stored tensor. `data` points into storage the Weights object owns (host or device).
struct WeightTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  // F8_E4M3 tensors: fp32 block scales (HF `weight_scale_inv`), row-major [ceil(rows/128), ceil(cols/128)]
  // per matrix (stacked experts: [E, ceil(rows/128), ceil(cols/128)]), in the same storage as data.
  const float* scale_inv = nullptr;
  int64_t numel() const;
  int64_t scale_numel() const;  // 0 unless F8_E4M3
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype) + size_t(scale_numel()) * 4; }
};

// How to store what is loaded. Matrices (2-D and stacked 3-D) take `matrix_dtype` (F32 for the CPU
// reference, BF16 for CUDA); vectors (norm weights, biases, e_score_correction_bias) are always F32.
struct WeightOptions {
  Where where = Where::Host;
  DType matrix_dtype = DType::F32;
  // GLM-5 on one GPU (DESIGN.md "Fitting GLM-5 on one GPU"): every MoE layer reads the expert and
  // shared-expert weights of the first MoE layer, every dense layer the MLP of layer 0. Attention
  // weights and the KV cache stay distinct per layer.
  bool share_mlp_weights = false;
  // FP8 weights as GLM-5-FP8 / DeepSeek-V3 checkpoints ship them: every tensor fp8_weight_name() accepts
  // is stored as F8_E4M3 codes + fp32 128x128 block scales (WeightTensor.scale_inv). An FP8 checkpoint
  // tensor is kept as is (codes copied, scales to fp32); a BF16/F32 one is quantized per block
  // (scale = amax / 448). The other matrices keep matrix_dtype (which must then be BF16 or F32).
  bool fp8_linear = false;
};

// Whether tensor `name` is stored FP8 under WeightOptions.fp8_linear: the projections of attention
// (q_a, q_b, kv_a_proj_with_mqa, o_proj), the indexer's wq_b and wk, the dense MLP, the routed and the
// shared experts — the tensors DeepSeek-V3's FP8 checkpoint quantizes. Not: embed_tokens, lm_head, the
// router (mlp.gate), indexer.weights_proj, norms, and kv_b_proj (the engine folds it into the absorbed
// query / output maps, kernels/mla_absorb, which read BF16; the FP8 checkpoint's kv_b is dequantized).
bool fp8_weight_name(const std::string& name);

// name -> tensor. Experts are also available stacked, under
//   model.layers.N.mlp.experts.{gate,up}_proj.weight  [E, moe_intermediate, hidden]
//   model.layers.N.mlp.experts.down_proj.weight       [E, hidden, moe_intermediate]
// (the per-expert names are not kept once stacked).
class Weights {
 public:
  // Throws glm5::Error "weights: missing tensor NAME" if absent.
  const WeightTensor& get(const std::string& name) const;
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  // Takes ownership of `storage` and registers `t` (whose data points into it) under `name`.
  void add(const std::string& name, WeightTensor t, Buffer storage);
  // Registers `name` as another name for the already-added tensor `target` (no copy).
  void alias(const std::string& name, const std::string& target);
  size_t stored_bytes() const;         // bytes actually allocated (shared tensors once)
  size_t logical_bytes() const;        // bytes if every name had its own copy
  bool shared_mlp() const { return shared_mlp_; }
  void set_shared_mlp(bool v) { shared_mlp_ = v; }
  const std::map<std::string, WeightTensor>& tensors() const { return tensors_; }

 private:
  std::map<std::string, WeightTensor> tensors_;
  std::vector<Buffer> storage_;
  bool shared_mlp_ = false;
};

// Loads model.safetensors (or model-*.safetensors shards) from `dir`, checking every tensor of
// expected_tensors(cfg) is present with the right shape and a supported dtype (BF16, F16, F32,
// F8_E4M3 with its `<name>_scale_inv` 128x128 block scales, dequantized on load).
// Throws glm5::Error naming the file and tensor for any mismatch, truncation or malformed header.
Weights load_weights(const ModelConfig& cfg, const std::string& dir, const WeightOptions& opt);

// Seeded synthetic weights with realistic scales: linear weights ~ N(0, 1/in_features) so
// activations keep unit scale, norm weights ~ 1 ± 0.1, router bias ~ 0.01. The value of element i
// of tensor NAME depends only on (seed, NAME, i), so host and device generation agree exactly.
Weights synthetic_weights(const ModelConfig& cfg, uint64_t seed, const WeightOptions& opt);

// "model.layers.<i>." (the prefix of layer i's tensor names) and "[d0, d1, ...]" (a shape in error messages); both
// with the tensor lists in model/tensor_specs.cpp.
std::string layer_prefix(int i);
std::string shape_str(const std::vector<int64_t>& shape);

// The tensors a Weights object holds for `cfg`: expected_tensors with each MoE layer's per-expert
// matrices replaced by the three stacked ones (model.layers.N.mlp.experts.{gate,up,down}_proj.weight).
std::vector<TensorSpec> stored_tensor_specs(const ModelConfig& cfg);

// With share_mlp_weights: the name whose storage `name` (a stored_tensor_specs name) reuses, or "" when
// it has its own. MoE layers' stacked experts and shared_experts.* -> the first MoE layer's; dense
// layers' mlp.* -> the first dense layer's. Router gate weight / bias, norms and attention: "".
std::string shared_mlp_target(const ModelConfig& cfg, const std::string& name);

// Bytes synthetic_weights / load_weights would allocate for (cfg, opt), without allocating: vectors
// F32, matrices opt.matrix_dtype, shared tensors once. Lets the engine say whether GLM-5 fits.
size_t estimate_weight_bytes(const ModelConfig& cfg, const WeightOptions& opt);

}  // namespace glm5
