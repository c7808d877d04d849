#include "engine/run_spec.h"

#include "common/buffer.h"
#include "common/error.h"

namespace glm5 {

Backend resolve_backend(const std::string& name) {
  require(name == "auto" || name == "cuda" || name == "cpu", "--backend must be auto, cuda or cpu, got '" + name + "'");
  if (name == "cpu") return Backend::Cpu;
  const bool gpu = cuda_available();
  require(gpu || name == "auto", "--backend cuda: no usable CUDA device (driver missing or no GPU)");
  return gpu ? Backend::Cuda : Backend::Cpu;
}

std::string kv_path_name(KvPath p) {
  switch (p) {
    case KvPath::Cast: return "cast";
    case KvPath::GatherCast: return "gather-cast";
    case KvPath::Fp8: return "fp8";
    case KvPath::Bf16: return "bf16";
  }
  return "?";
}

KvPath parse_kv_path(const std::string& s) {
  if (s == "cast") return KvPath::Cast;
  if (s == "gather-cast") return KvPath::GatherCast;
  if (s == "fp8") return KvPath::Fp8;
  if (s == "bf16") return KvPath::Bf16;
  throw Error("--kv-path: unknown KV path '" + s + "' (expected cast, gather-cast, fp8 or all)");
}

}  // namespace glm5
