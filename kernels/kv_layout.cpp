// Latent / indexer cache layouts (kv_layout.h): construction and validation.
#include "kernels/kv_layout.h"

#include <string>

#include "common/error.h"

namespace glm5 {

LatentLayout make_latent_layout(int latent_dim, int rope_dim, bool fp8) {
  require(latent_dim > 0 && latent_dim % 16 == 0,
          "latent cache layout: kv_lora_rank = " + std::to_string(latent_dim) + ", expected a positive multiple of 16");
  require(rope_dim >= 0 && rope_dim % 2 == 0,
          "latent cache layout: qk_rope_head_dim = " + std::to_string(rope_dim) + ", expected a non-negative even number");
  LatentLayout l;
  l.latent_dim = latent_dim;
  l.rope_dim = rope_dim;
  l.fp8 = fp8;
  if (fp8) {
    l.group = latent_dim % 128 == 0 ? 128 : latent_dim;
    l.row_bytes = latent_dim + 4 * (latent_dim / l.group) + 2 * rope_dim;
  } else {
    l.group = latent_dim;
    l.row_bytes = 2 * (latent_dim + rope_dim);
  }
  return l;
}

void check_latent_layout(const LatentLayout& l, const char* who) {
  LatentLayout want = make_latent_layout(l.latent_dim, l.rope_dim, l.fp8);
  require(l.group == want.group && l.row_bytes == want.row_bytes,
          std::string(who) + ": latent layout L=" + std::to_string(l.latent_dim) + " R=" + std::to_string(l.rope_dim) +
              (l.fp8 ? " fp8" : " bf16") + " has group " + std::to_string(l.group) + ", row_bytes " +
              std::to_string(l.row_bytes) + "; expected group " + std::to_string(want.group) + ", row_bytes " +
              std::to_string(want.row_bytes) + " (use make_latent_layout)");
}

void check_indexer_layout(const IndexerLayout& l, const char* who) {
  require(l.dim > 0 && l.dim % 4 == 0, std::string(who) + ": indexer layout dim = " + std::to_string(l.dim) +
                                           ", expected a positive multiple of 4");
}

}  // namespace glm5
