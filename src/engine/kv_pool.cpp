#include "engine/kv_pool.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/error.h"
#include "kernels/kv_cache.h"

namespace glm5 {

// [seq_lens | slots | positions] x batch int32 in pinned host memory; `copied` marks their last upload.
struct KvPool::Staging {
  int32_t* host = nullptr;
  cudaEvent_t copied = nullptr;
  bool pending = false;
  explicit Staging(int batch) {
    CUDA_CHECK(cudaMallocHost(&host, size_t(3) * batch * sizeof(int32_t)));
    CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  }
  ~Staging() {
    if (copied) cudaEventDestroy(copied);
    if (host) cudaFreeHost(host);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
};

namespace {
int64_t pages_for(int64_t tokens) { return (tokens + kPageSize - 1) / kPageSize; }
}  // namespace

size_t KvPool::planned_bytes(const ModelConfig& cfg, const KvPoolOptions& opt) {
  LatentLayout l = make_latent_layout(cfg.kv_lora_rank, cfg.qk_rope_head_dim, opt.fp8);
  int64_t cap = pages_for(opt.capacity_tokens) * kPageSize;
  size_t per_layer = size_t(cap) * l.row_bytes;
  if (cfg.has_indexer) per_layer += size_t(cap) * IndexerLayout{cfg.index_head_dim, opt.fp8}.bytes_per_token();
  return per_layer * cfg.num_hidden_layers;
}

std::string KvPool::capacity_error(const KvPoolOptions& opt) {
  const int64_t total_pages = pages_for(opt.capacity_tokens);
  const int64_t needed = int64_t(opt.batch) * pages_for(opt.max_seq_len);
  if (needed <= total_pages) return "";
  return "KV pool: --pool-tokens " + std::to_string(opt.capacity_tokens) + " (" + std::to_string(total_pages) +
         " pages of 64) cannot hold " + std::to_string(opt.batch) + " requests x " + std::to_string(opt.max_seq_len) +
         " tokens (" + std::to_string(needed) + " pages)";
}

KvPool::KvPool(const ModelConfig& cfg, const KvPoolOptions& opt) : cfg_(cfg), opt_(opt) {
  require(opt.batch > 0, "KV pool: batch must be positive, got " + std::to_string(opt.batch));
  require(opt.max_seq_len > 0, "KV pool: max sequence length must be positive");
  latent_layout_ = make_latent_layout(cfg.kv_lora_rank, cfg.qk_rope_head_dim, opt.fp8);
  indexer_layout_ = IndexerLayout{cfg.index_head_dim, opt.fp8};
  capacity_ = pages_for(opt.capacity_tokens) * kPageSize;
  max_pages_ = int(pages_for(opt.max_seq_len));
  const std::string full = capacity_error(opt);
  require(full.empty(), full);

  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    latent_.emplace_back(opt.where, size_t(capacity_) * latent_layout_.row_bytes,
                         "KV pool latent cache, layer " + std::to_string(l));
    if (cfg.has_indexer)
      indexer_.emplace_back(opt.where, size_t(capacity_) * indexer_layout_.bytes_per_token(),
                            "KV pool indexer cache, layer " + std::to_string(l));
  }
  // Pages of each request come from a shuffled free list: rows of one request are scattered.
  std::vector<int32_t> pages(capacity_ / kPageSize);
  std::iota(pages.begin(), pages.end(), 0);
  std::mt19937_64 rng(opt.seed);
  std::shuffle(pages.begin(), pages.end(), rng);
  block_table_.assign(size_t(opt.batch) * max_pages_, 0);
  for (int b = 0; b < opt.batch; ++b)
    for (int p = 0; p < max_pages_; ++p) block_table_[size_t(b) * max_pages_ + p] = pages[size_t(b) * max_pages_ + p];
  seq_lens_.assign(opt.batch, 0);
  slots_.assign(opt.batch, 0);
  positions_.assign(opt.batch, 0);
  block_table_dev_ = Buffer(opt.where, block_table_.size() * 4, "KV block table");
  seq_lens_dev_ = Buffer(opt.where, size_t(opt.batch) * 4, "KV sequence lengths");
  slots_dev_ = Buffer(opt.where, size_t(opt.batch) * 4, "KV new-token slots");
  positions_dev_ = Buffer(opt.where, size_t(opt.batch) * 4, "token positions");
  block_table_dev_.upload(block_table_.data(), block_table_.size() * 4);
}

void KvPool::fill_context(int context, cudaStream_t stream) {
  require(context >= 0 && context < opt_.max_seq_len,
          "KV pool: context " + std::to_string(context) + " must be below the reserved length " +
              std::to_string(opt_.max_seq_len));
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    KvFillParams p;
    p.pool = latent(l);
    p.layout = latent_layout_;
    p.indexer_cache = indexer(l);
    p.indexer_layout = indexer_layout_;
    p.first_slot = 0;
    p.rows = capacity_;
    p.seed = opt_.seed * 1000003ull + uint64_t(l);
    if (opt_.where == Where::Device) kv_fill_random_cuda(p, stream);
    else kv_fill_random_cpu(p);
  }
  std::fill(seq_lens_.begin(), seq_lens_.end(), context);
}

void KvPool::begin_step(cudaStream_t stream) {
  for (int b = 0; b < opt_.batch; ++b) {
    int pos = seq_lens_[b];
    require(pos < opt_.max_seq_len, "KV pool: request " + std::to_string(b) + " ran past its reserved " +
                                        std::to_string(opt_.max_seq_len) + " tokens");
    slots_[b] = block_table_[size_t(b) * max_pages_ + pos / kPageSize] * kPageSize + pos % kPageSize;
    positions_[b] = pos;
    seq_lens_[b] = pos + 1;
  }
  if (opt_.where != Where::Device) {
    seq_lens_dev_.upload(seq_lens_.data(), seq_lens_.size() * 4);
    slots_dev_.upload(slots_.data(), slots_.size() * 4);
    positions_dev_.upload(positions_.data(), positions_.size() * 4);
    return;
  }
  if (!staging_) staging_ = std::make_shared<Staging>(opt_.batch);
  if (staging_->pending) CUDA_CHECK(cudaEventSynchronize(staging_->copied));
  const size_t n = size_t(opt_.batch);
  int32_t* h = staging_->host;
  std::copy(seq_lens_.begin(), seq_lens_.end(), h);
  std::copy(slots_.begin(), slots_.end(), h + n);
  std::copy(positions_.begin(), positions_.end(), h + 2 * n);
  CUDA_CHECK(cudaMemcpyAsync(seq_lens_dev_.data(), h, n * 4, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(slots_dev_.data(), h + n, n * 4, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemcpyAsync(positions_dev_.data(), h + 2 * n, n * 4, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(staging_->copied, stream));
  staging_->pending = true;
}

}  // namespace glm5
