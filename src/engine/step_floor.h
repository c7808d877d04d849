// The byte floor of one decode step (issue 4's benchmark): the bytes a step cannot avoid reading,
// over the measured device copy bandwidth. A step can be no faster than reading, once each,
//   weights:  every layer's attention projections (q_a, q_b, kv_a, kv_b, o_proj, the DSA indexer's
//             wq_b / wk / weights_proj where the layer has its own indexer) and norms; dense layers'
//             MLP (gate, up, down); MoE layers' router, shared expert and the routed experts the
//             batch selects; the embedding rows of the batch's tokens and lm_head;
//   KV:       per layer and request, the indexer keys of the whole context (DSA scores every cached
//             token) plus the latent rows attention reads (min(context, index_topk); the whole
//             context without an indexer), in the pool's dtype (656-byte FP8 or 1152-byte BF16 rows
//             for GLM-5),
// at Peaks::copy_gbps (measured device-to-device copy rate, read + write bytes per second; the
// floor takes it as the rate at which a step can stream its bytes).
//
// Routed experts: the number of distinct experts a batch selects depends on routing; for synthetic
// weights routing is effectively random, so the floor uses the expectation under uniform routing of
// K distinct experts per token out of E: E * (1 - (1 - K/E)^B) per MoE layer (this rank's share
// under expert parallelism). The number is reported with that basis.
//
// Tensor parallelism (tp > 1): this rank's shard (heads / tp, MLP and shared-expert columns / tp,
// routed experts / tp; q_a, kv_a, indexer, router, embedding and lm_head replicated, as the engine
// shards them). Activations and scratch traffic are not counted (they are not weights or KV).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/weights.h"

namespace glm5 {

struct StepFloorInput {
  int batch = 1;
  int context = 0;              // tokens cached per request when the step runs
  bool kv_fp8 = true;           // FP8 pool rows (else BF16)
  double weight_bytes_per_element = 2;  // BF16 matrices: 2 (FP8 with 128x128 fp32 scales: 1 + 4/16384)
  std::string weights_dtype = "bf16";   // what the bytes per element stand for (reported)
  int tp = 1;                   // this rank's shard of a tp-way split
  double copy_gbps = 0;         // Peaks::copy_gbps [GB/s]
};

struct StepFloor {
  double attention_weight_bytes = 0;  // all layers, incl. indexer projections and norms
  double dense_mlp_bytes = 0;         // dense layers' MLP
  double router_bytes = 0;
  double shared_expert_bytes = 0;
  double routed_expert_bytes = 0;     // expected distinct experts x 3 matrices, all MoE layers
  double expected_experts_per_layer = 0;  // distinct routed experts read per MoE layer (this rank)
  double embed_lm_head_bytes = 0;
  double kv_bytes = 0;                // indexer keys + latent rows, all layers and requests
  double total_bytes = 0;
  double floor_us = 0;                // total_bytes / copy rate; 0 when copy_gbps is 0
};

// Throws glm5::Error for batch < 1, context < 0, tp < 1 or a config whose dimensions tp does not divide.
StepFloor step_floor(const ModelConfig& cfg, const StepFloorInput& in);

// The same floor with the weight bytes taken from the tensors actually loaded (each name's dtype, and
// F8_E4M3 tensors' fp32 128x128 block scales, as stored: FP8 projections count 1 byte per parameter
// plus their scales, the BF16 ones 2). Every name counts as distinct (shared MLP storage is read per
// layer: its working set is far larger than L2). in.weight_bytes_per_element is ignored; the label
// in.weights_dtype is replaced by "fp8" when any tensor is F8_E4M3, else the lm_head's dtype.
StepFloor step_floor(const ModelConfig& cfg, const Weights& weights, StepFloorInput& in);

// The floor as report.json writes it: bytes by part, floor_us, the inputs and the experts basis.
nlohmann::json to_json(const StepFloor& f, const StepFloorInput& in);

}  // namespace glm5
