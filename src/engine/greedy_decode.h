// Greedy decoding of one prompt through the decode path (the prompt is fed token by token, exactly
// as decode steps), optionally teacher-forced, with per-step logits kept for comparison against a
// reference (the golden HF logits).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/decode_engine.h"
#include "engine/run_spec.h"
#include "model/config.h"
#include "model/weights.h"

namespace glm5 {

struct GreedyDecodeResult {
  std::vector<int32_t> generated;            // [new_tokens] greedy tokens (teacher-forced: the model's top-1)
  std::vector<std::vector<float>> logits;    // [new_tokens][vocab]: row 0 after the last prompt token
  uint64_t logits_hash = 0;                  // FNV-1a over the bits of every logits row
};

// Feeds `prompt` then decodes `new_tokens` tokens greedily (batch 1). If `forced` is non-empty,
// the k-th decoded step is fed forced[k-1] instead of the model's own token (teacher forcing).
// Throws glm5::Error for an empty prompt, token ids outside the vocabulary, or new_tokens < 1.
GreedyDecodeResult greedy_decode(const ModelConfig& cfg, const Weights& weights, Backend backend, KvPath kv_path,
                                 const std::vector<int32_t>& prompt, int new_tokens,
                                 const std::vector<int32_t>& forced = {},
                                 ActivationPrecision precision = ActivationPrecision::SplitBf16);

class Communicator;

// The same decode split over tensor/expert-parallel ranks: one thread per rank, `weights[r]` on rank
// r's side (CUDA: device r), `comms[r]` its communicator. Returns rank 0's result (every rank
// computes the same logits after the all-reduces). Throws glm5::Error naming a failed rank.
GreedyDecodeResult greedy_decode_parallel(const ModelConfig& cfg, const std::vector<const Weights*>& weights,
                                          Backend backend, KvPath kv_path, const std::vector<int32_t>& prompt,
                                          int new_tokens, const std::vector<Communicator*>& comms,
                                          const std::vector<int32_t>& forced = {},
                                          ActivationPrecision precision = ActivationPrecision::SplitBf16);

// ||a - b||_2 / ||b||_2.
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

// Index of the largest logit (first on ties); 0 for an empty row.
int argmax_index(const std::vector<float>& logits);

// Largest minus second-largest logit: how far a top-1 choice is from flipping.
float top1_margin(const std::vector<float>& logits);

}  // namespace glm5
