// What one profiling or decode run does: backend, KV path, batch, context, pool, steps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace glm5 {

enum class Backend { Cpu, Cuda };

// How KV rows reach the attention kernel (DESIGN.md "The three KV paths").
enum class KvPath {
  Cast,        // cast the whole FP8 pool to a BF16 scratch pool, then BF16 attention on the top-k rows
  GatherCast,  // gather + dequantize the top-k rows into a compact BF16 buffer, then BF16 attention
  Fp8,         // attention reads FP8 rows and scales directly
  Bf16,        // the pool itself is BF16 (--kv-dtype bf16): no cast at all
};

// "auto" (CUDA when a usable device is present, else CPU), "cuda" or "cpu". Throws glm5::Error for
// another name, or for "cuda" without a usable device.
Backend resolve_backend(const std::string& name);

std::string kv_path_name(KvPath p);          // "cast", "gather-cast", "fp8", "bf16"
KvPath parse_kv_path(const std::string& s);  // throws glm5::Error listing the valid names

struct RunSpec {
  Backend backend = Backend::Cpu;
  KvPath kv_path = KvPath::Fp8;
  int batch = 1;                 // requests decoded together
  int context = 0;               // tokens already in each request's KV cache before the first step
  int64_t pool_tokens = 0;       // KV pool capacity per layer in tokens (0: just enough, page-rounded)
  int steps = 1;                 // measured decode steps
  int warmup = 0;                // untraced... decode steps before the measured ones
  uint64_t seed = 1234;          // synthetic weights / KV contents / prompt tokens
  bool share_mlp_weights = false;  // GLM-5 on one GPU: one set of expert/MLP weights for all layers
};

}  // namespace glm5
