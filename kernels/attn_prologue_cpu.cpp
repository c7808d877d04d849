// CPU twins of attn_prologue.h: the standalone CPU kernels in the order the fused launch runs them.
#include <string>

#include "common/error.h"
#include "kernels/attn_prologue.h"

namespace glm5 {

void validate_attn_prologue_params(const AttnPrologueParams& p) {
  if (p.q_part) validate_norm_params(p.q_a_norm, "attn_prologue q_a_norm");
  validate_norm_params(p.kv_a_norm, "attn_prologue kv_a_norm");
  validate_rope_params(p.k_rope, "attn_prologue k_rope");
  validate_kv_write_params(p.kv_write);
  const int B = p.kv_write.B;
  auto same_rows = [&](int rows, const char* part) {
    require(rows == B, std::string("attn_prologue: ") + part + " rows = " + std::to_string(rows) +
                           ", expected kv_write.B = " + std::to_string(B));
  };
  if (p.q_part) same_rows(p.q_a_norm.rows, "q_a_norm");
  same_rows(p.kv_a_norm.rows, "kv_a_norm");
  same_rows(p.k_rope.rows, "k_rope");
  require(p.k_rope.heads == 1, "attn_prologue: k_rope.heads = " + std::to_string(p.k_rope.heads) + ", expected 1");
  if (!p.indexer) return;
  validate_norm_params(p.idx_k_norm, "attn_prologue idx_k_norm");
  validate_rope_params(p.idx_k_rope, "attn_prologue idx_k_rope");
  validate_indexer_key_write_params(p.idx_k_write);
  same_rows(p.idx_k_norm.rows, "idx_k_norm");
  same_rows(p.idx_k_rope.rows, "idx_k_rope");
  same_rows(p.idx_k_write.B, "idx_k_write");
  require(p.idx_k_rope.heads == 1,
          "attn_prologue: idx_k_rope.heads = " + std::to_string(p.idx_k_rope.heads) + ", expected 1");
}

void attn_prologue_cpu(const AttnPrologueParams& p) {
  validate_attn_prologue_params(p);
  if (p.q_part) rmsnorm_cpu(p.q_a_norm);
  rmsnorm_cpu(p.kv_a_norm);
  rope_cpu(p.k_rope);
  kv_write_cpu(p.kv_write);
  if (!p.indexer) return;
  layernorm_cpu(p.idx_k_norm);
  rope_cpu(p.idx_k_rope);
  indexer_key_write_cpu(p.idx_k_write);
}

void rope2_cpu(const Rope2Params& p) {
  rope_cpu(p.a);
  rope_cpu(p.b);
}

}  // namespace glm5
