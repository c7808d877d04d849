// Paged KV pool (DESIGN.md "KV cache layout"): per layer, a latent cache of `capacity` token rows
// (656-byte FP8 rows or 1152-byte BF16 rows for GLM-5) and an indexer key cache (132 / 256 bytes a
// token), both addressed by pool slot = page * 64 + offset. Each request owns a list of pages (its
// block table), drawn from a shuffled free list so rows are scattered as in a long-running server.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime.h>

#include "common/buffer.h"
#include "kernels/kv_layout.h"
#include "model/config.h"

namespace glm5 {

struct KvPoolOptions {
  Where where = Where::Host;
  bool fp8 = true;               // FP8 latent + indexer caches (else BF16)
  int64_t capacity_tokens = 0;   // per layer, rounded up to whole pages
  int batch = 1;                 // requests
  int max_seq_len = 0;           // tokens a request may reach (context + decoded tokens)
  uint64_t seed = 0;             // page shuffle and random context contents
};

class KvPool {
 public:
  // Throws glm5::Error if batch * pages(max_seq_len) exceeds the capacity, naming both numbers.
  KvPool(const ModelConfig& cfg, const KvPoolOptions& opt);

  // Bytes the pool will allocate for (cfg, opt), without allocating.
  static size_t planned_bytes(const ModelConfig& cfg, const KvPoolOptions& opt);
  // "" when opt.capacity_tokens (rounded up to whole pages) holds opt.batch requests of opt.max_seq_len tokens,
  // else the one-line error the constructor throws (callers check it before they print or allocate anything).
  static std::string capacity_error(const KvPoolOptions& opt);

  uint8_t* latent(int layer) const { return latent_[layer].as<uint8_t>(); }
  uint8_t* indexer(int layer) const { return indexer_.empty() ? nullptr : indexer_[layer].as<uint8_t>(); }
  const LatentLayout& latent_layout() const { return latent_layout_; }
  const IndexerLayout& indexer_layout() const { return indexer_layout_; }
  int64_t capacity() const { return capacity_; }
  int max_pages() const { return max_pages_; }
  int batch() const { return opt_.batch; }

  // Fills every row of every layer's caches with seeded random values (stands in for a prefilled
  // context) and sets each request's length to `context` tokens.
  void fill_context(int context, cudaStream_t stream);

  // Reserves the next position of every request; afterwards new_slots()[b] is where request b's
  // token goes and seq_lens()[b] counts it. When the pool lives on the GPU the per-step tables
  // (seq_lens, new_slots, positions) are staged in pinned host memory and copied with
  // cudaMemcpyAsync on `stream`, so a CUDA graph captured on that stream reads them from the same
  // device addresses every replay. The staging buffer is reused: begin_step waits for the previous
  // step's copies (an event) before overwriting it.
  void begin_step(cudaStream_t stream = nullptr);
  const int32_t* block_table() const { return block_table_dev_.as<int32_t>(); }  // [B, max_pages]
  const int32_t* seq_lens() const { return seq_lens_dev_.as<int32_t>(); }        // [B]
  const int32_t* new_slots() const { return slots_dev_.as<int32_t>(); }          // [B]
  const int32_t* positions() const { return positions_dev_.as<int32_t>(); }      // [B] = seq_len - 1
  const std::vector<int32_t>& host_seq_lens() const { return seq_lens_; }

 private:
  ModelConfig cfg_;
  KvPoolOptions opt_;
  LatentLayout latent_layout_;
  IndexerLayout indexer_layout_;
  int64_t capacity_ = 0;
  int max_pages_ = 0;
  std::vector<Buffer> latent_, indexer_;
  std::vector<int32_t> block_table_, seq_lens_, slots_, positions_;
  Buffer block_table_dev_, seq_lens_dev_, slots_dev_, positions_dev_;
  struct Staging;  // pinned host copy of the per-step tables + the event of their last upload
  std::shared_ptr<Staging> staging_;
};

}  // namespace glm5
