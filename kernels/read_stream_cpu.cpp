// Host side of kernels/read_stream.h: validation and the CPU twin.
#include <cstring>

#include "common/error.h"
#include "kernels/read_stream.h"

namespace glm5 {

void validate_read_stream_params(const ReadStreamParams& p) {
  require(p.src != nullptr, "read_stream: src is null");
  require(p.sink != nullptr, "read_stream: sink is null");
  require(reinterpret_cast<uintptr_t>(p.src) % 16 == 0, "read_stream: src must be 16-byte aligned");
  require(p.bytes > 0 && p.bytes % 16 == 0, "read_stream: bytes must be a positive multiple of 16");
  require(p.ctas_per_sm >= 1 && p.ctas_per_sm <= 8, "read_stream: ctas_per_sm must be in [1, 8]");
  require(p.threads == 128 || p.threads == 256 || p.threads == 512 || p.threads == 1024,
          "read_stream: threads must be 128, 256, 512 or 1024");
  require(p.unroll == 1 || p.unroll == 2 || p.unroll == 4 || p.unroll == 8 || p.unroll == 16,
          "read_stream: unroll must be 1, 2, 4, 8 or 16");
}

void validate_read_rows_params(const ReadRowsParams& p) {
  ReadStreamParams s = p.s;
  s.ctas_per_sm = 1;
  validate_read_stream_params(s);
  require(p.row_bytes > 0 && p.row_bytes % 512 == 0, "read_rows: row_bytes must be a positive multiple of 512");
  require(p.s.bytes % size_t(p.row_bytes) == 0, "read_rows: bytes must be a multiple of row_bytes");
  require(p.rows_per_warp == 1 || p.rows_per_warp == 2 || p.rows_per_warp == 4 || p.rows_per_warp == 8,
          "read_rows: rows_per_warp must be 1, 2, 4 or 8");
  require(p.s.unroll <= 8, "read_rows: unroll must be 1, 2, 4 or 8");
  require(p.smem_pad >= 0 && p.smem_pad <= 227 * 1024, "read_rows: smem_pad must be in [0, 227 KiB]");
}

uint32_t read_stream_xor_cpu(const ReadStreamParams& p) {
  validate_read_stream_params(p);
  const auto* b = static_cast<const unsigned char*>(p.src);
  uint32_t x = 0;
  for (size_t i = 0; i < p.bytes; i += 4) {
    uint32_t w;
    std::memcpy(&w, b + i, 4);
    x ^= w;
  }
  return x;
}

}  // namespace glm5
