// CPU twins of the small elementwise ops: embedding lookup, residual add, SwiGLU, argmax.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/error.h"
#include "kernels/elementwise.h"

namespace glm5 {

namespace {
std::string field(const char* op, const char* params, const char* name) {
  return std::string(op) + ": " + params + "." + name;
}
void require_positive(long long value, const char* op, const char* params, const char* name) {
  require(value > 0, field(op, params, name) + " = " + std::to_string(value) + ", expected > 0");
}
}  // namespace

void validate_embedding_params(const EmbeddingParams& p, const char* op) {
  require(p.tokens != nullptr, field(op, "EmbeddingParams", "tokens") + " is null");
  require(p.table != nullptr, field(op, "EmbeddingParams", "table") + " is null");
  require(p.out != nullptr, field(op, "EmbeddingParams", "out") + " is null");
  require(p.table_dtype == DType::F32 || p.table_dtype == DType::BF16,
          field(op, "EmbeddingParams", "table_dtype") + " = " + dtype_name(p.table_dtype) + ", expected F32 or BF16");
  require_positive(p.rows, op, "EmbeddingParams", "rows");
  require_positive(p.dim, op, "EmbeddingParams", "dim");
}

void validate_add_params(const AddParams& p, const char* op) {
  require(p.y != nullptr, field(op, "AddParams", "y") + " is null");
  require(p.x != nullptr, field(op, "AddParams", "x") + " is null");
  require_positive(p.n, op, "AddParams", "n");
}

void validate_silu_mul_params(const SiluMulParams& p, const char* op) {
  require(p.gate_up != nullptr, field(op, "SiluMulParams", "gate_up") + " is null");
  require(p.out != nullptr, field(op, "SiluMulParams", "out") + " is null");
  require_positive(p.rows, op, "SiluMulParams", "rows");
  require_positive(p.inter, op, "SiluMulParams", "inter");
}

void validate_argmax_params(const ArgmaxParams& p, const char* op) {
  require(p.logits != nullptr, field(op, "ArgmaxParams", "logits") + " is null");
  require(p.out != nullptr, field(op, "ArgmaxParams", "out") + " is null");
  require_positive(p.rows, op, "ArgmaxParams", "rows");
  require_positive(p.n, op, "ArgmaxParams", "n");
}

void embedding_cpu(const EmbeddingParams& p) {
  validate_embedding_params(p, "embedding_cpu");
  for (int r = 0; r < p.rows; ++r) {
    const size_t row = size_t(p.tokens[r]) * p.dim;
    float* out = p.out + size_t(r) * p.dim;
    if (p.table_dtype == DType::F32) {
      std::memcpy(out, static_cast<const float*>(p.table) + row, sizeof(float) * p.dim);
    } else {
      const uint16_t* t = static_cast<const uint16_t*>(p.table) + row;
      for (int i = 0; i < p.dim; ++i) out[i] = bf16_bits_to_float(t[i]);
    }
  }
}

void add_inplace_cpu(const AddParams& p) {
  validate_add_params(p, "add_inplace_cpu");
  for (int64_t i = 0; i < p.n; ++i) p.y[i] += p.x[i];
}

void silu_mul_cpu(const SiluMulParams& p) {
  validate_silu_mul_params(p, "silu_mul_cpu");
  for (int r = 0; r < p.rows; ++r) {
    const float* gate = p.gate_up + size_t(r) * 2 * p.inter;
    const float* up = gate + p.inter;
    float* out = p.out + size_t(r) * p.inter;
    for (int i = 0; i < p.inter; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  }
}

void argmax_cpu(const ArgmaxParams& p) {
  validate_argmax_params(p, "argmax_cpu");
  for (int r = 0; r < p.rows; ++r) {
    const float* row = p.logits + size_t(r) * p.n;
    float best = -std::numeric_limits<float>::infinity();
    int32_t best_index = 0;
    for (int j = 0; j < p.n; ++j) {
      const float v = std::isnan(row[j]) ? -std::numeric_limits<float>::infinity() : row[j];
      if (v > best) {
        best = v;
        best_index = j;
      }
    }
    p.out[r] = best_index;
  }
}

}  // namespace glm5
