// Host side of kernels/l2_prefetch.h: validation, the plan, and the CPU twin (validation only).
#include <algorithm>
#include <cstdint>

#include "common/error.h"
#include "kernels/l2_prefetch.h"

namespace glm5 {

void validate_l2_prefetch_params(const L2PrefetchParams& p) {
  require(p.base != nullptr, "l2_prefetch: base is null");
  require(reinterpret_cast<uintptr_t>(p.base) % 16 == 0, "l2_prefetch: base must be 16-byte aligned");
  require(p.rows > 0, "l2_prefetch: rows must be positive");
  require(p.row_bytes > 0, "l2_prefetch: row_bytes must be positive");
  require(p.row_stride >= p.row_bytes && p.row_stride % 16 == 0,
          "l2_prefetch: row_stride must be >= row_bytes and a multiple of 16");
  require(p.period > 0 && p.period % 16 == 0, "l2_prefetch: period must be a positive multiple of 16");
  require(p.take > 0 && p.take <= p.period && p.take % 16 == 0,
          "l2_prefetch: take must be a multiple of 16 in (0, period]");
  const int64_t per_row = (p.row_bytes + p.period - 1) / p.period;
  require(per_row <= (int64_t(1) << 31) / p.rows, "l2_prefetch: rows * periods per row must be <= 2^31");
}

L2PrefetchParams l2_prefetch_plan(const void* base, int64_t rows, int64_t row_bytes, int64_t row_stride,
                                  double fraction, int64_t period) {
  require(fraction > 0 && fraction <= 1, "l2_prefetch: fraction must be in (0, 1]");
  require(period >= 0 && period % 16 == 0, "l2_prefetch: period must be 0 (the default) or a positive multiple of 16");
  L2PrefetchParams p;
  p.base = base;
  p.rows = rows;
  p.row_bytes = row_bytes;
  p.row_stride = row_stride;
  p.period = std::min<int64_t>(period > 0 ? period : 4096, (row_bytes + 15) / 16 * 16);  // rows shorter than 4096 bytes: one period each
  p.take = std::max<int64_t>(16, int64_t(fraction * double(p.period)) / 16 * 16);
  return p;
}

int64_t l2_prefetch_bytes(const L2PrefetchParams& p) {
  const int64_t full = p.row_bytes / p.period, rest = p.row_bytes % p.period;
  return p.rows * (full * p.take + std::min(rest, p.take) / 16 * 16);
}

void l2_prefetch_cpu(const L2PrefetchParams& p) { validate_l2_prefetch_params(p); }

}  // namespace glm5
