// CPU twins of kv_cast.h: FP8 latent rows -> BF16 rows, whole pool (`cast`) or gathered (`gather-cast`).
#include <cstring>
#include <string>

#include "common/error.h"
#include "kernels/kv_cast.h"

namespace glm5 {

void validate_kv_cast_params(const KvCastParams& p) {
  check_latent_layout(p.layout, "kv_cast");
  require(p.layout.fp8, "kv_cast: the pool layout must be fp8 (a bf16 pool needs no cast)");
  require(p.rows >= 0, "kv_cast: rows = " + std::to_string(p.rows) + ", expected >= 0");
  require(p.rows == 0 || (p.pool && p.out), "kv_cast: pool and out must be non-null");
}

void kv_cast_cpu(const KvCastParams& p) {
  validate_kv_cast_params(p);
  const int W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t r = 0; r < p.rows; ++r)
    dequant_latent_row_bf16(p.pool + r * p.layout.row_bytes, p.layout, p.out + r * W);
}

void validate_kv_gather_cast_params(const KvGatherCastParams& p) {
  check_latent_layout(p.layout, "kv_gather_cast");
  require(p.layout.fp8, "kv_gather_cast: the pool layout must be fp8 (a bf16 pool needs no cast)");
  require(p.count >= 0, "kv_gather_cast: count = " + std::to_string(p.count) + ", expected >= 0");
  require(p.count == 0 || (p.pool && p.indices && p.out && p.compact_indices),
          "kv_gather_cast: pool, indices, out and compact_indices must be non-null");
}

void kv_gather_cast_cpu(const KvGatherCastParams& p) {
  validate_kv_gather_cast_params(p);
  const int W = p.layout.latent_dim + p.layout.rope_dim;
  for (int64_t i = 0; i < p.count; ++i) {
    int32_t t = p.indices[i];
    require(t >= -1, "kv_gather_cast: indices[" + std::to_string(i) + "] = " + std::to_string(t) +
                         ", expected a pool slot or -1");
    if (t < 0) {
      std::memset(p.out + i * W, 0, sizeof(uint16_t) * W);
      p.compact_indices[i] = -1;
    } else {
      dequant_latent_row_bf16(p.pool + int64_t(t) * p.layout.row_bytes, p.layout, p.out + i * W);
      p.compact_indices[i] = int32_t(i);
    }
  }
}

}  // namespace glm5
