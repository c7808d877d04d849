// Weights: the tensor list a config implies, loading from safetensors checkpoints (BF16 / F16 / F32 /
// block-scaled FP8), stacking experts, sharing MLP weights across layers, and seeded synthetic values.
#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "common/input_file.h"
#include "common/rng.h"
#include "model/safetensors.h"
#include "model/synthetic.h"

namespace glm5 {

namespace {

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Stored dtype of a tensor: vectors (norm weights, biases) F32, FP8-eligible matrices F8_E4M3 under
// opt.fp8_linear, other matrices opt.matrix_dtype.
DType stored_dtype(const std::string& name, const std::vector<int64_t>& shape, const WeightOptions& opt) {
  if (shape.size() == 1) return DType::F32;
  if (opt.fp8_linear && fp8_weight_name(name)) return DType::F8_E4M3;
  return opt.matrix_dtype;
}

// FP8 block geometry of a [rows, cols] or stacked [E, rows, cols] tensor.
struct BlockGeometry {
  int64_t mats = 1, rows = 0, cols = 0;
  int64_t row_blocks() const { return (rows + 127) / 128; }
  int64_t col_blocks() const { return (cols + 127) / 128; }
  int64_t scales() const { return mats * row_blocks() * col_blocks(); }
  int64_t numel() const { return mats * rows * cols; }
};
BlockGeometry block_geometry(const std::vector<int64_t>& shape) {
  BlockGeometry g;
  g.cols = shape.back();
  g.rows = shape[shape.size() - 2];
  g.mats = shape.size() == 3 ? shape[0] : 1;
  return g;
}
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
// Bytes of a stored tensor: FP8 codes (padded to 16) then fp32 scales; else numel * dtype size.
size_t stored_bytes_of(const std::vector<int64_t>& shape, DType dt) {
  if (dt != DType::F8_E4M3) return size_t(numel_of(shape)) * dtype_size(dt);
  const BlockGeometry g = block_geometry(shape);
  return align16(size_t(g.numel())) + size_t(g.scales()) * 4;
}

void check_options(const WeightOptions& opt) {
  if (opt.matrix_dtype != DType::F32 && opt.matrix_dtype != DType::BF16)
    throw Error("weights: matrix dtype must be F32 or BF16, got " + dtype_name(opt.matrix_dtype));
}

// ---- checkpoint files ----

struct Checkpoint {
  std::string dir;
  std::vector<SafetensorsFile> files;
  std::map<std::string, const SafetensorsView*> views;  // tensor name -> view
  std::map<std::string, const std::string*> file_of;    // tensor name -> file path
  std::string describe_missing(const std::string& name) const {
    if (files.size() == 1) return files[0].path() + ": missing tensor '" + name + "'";
    return dir + ": missing tensor '" + name + "' (in none of " + std::to_string(files.size()) + " shards)";
  }
};

Checkpoint open_checkpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint ck;
  ck.dir = dir;
  std::vector<std::string> paths;
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) {
    paths.push_back(dir);
  } else if (!fs::is_directory(dir, ec)) {
    throw Error(dir + ": weights directory does not exist");
  } else if (fs::exists(fs::path(dir) / "model.safetensors", ec)) {
    paths.push_back((fs::path(dir) / "model.safetensors").string());
  } else if (fs::exists(fs::path(dir) / "model.safetensors.index.json", ec)) {
    const std::string idx = (fs::path(dir) / "model.safetensors.index.json").string();
    require_regular_file(idx, "the safetensors index");
    std::ifstream in(idx);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(idx + ": not valid JSON");
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(idx + ": key 'weight_map' must be an object {tensor name: file name}");
    std::set<std::string> names;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        throw Error(idx + ": key 'weight_map." + it.key() + "' must be a file name string");
      names.insert(it.value().get<std::string>());
    }
    for (const std::string& n : names) {
      if (n.find('/') != std::string::npos || n.find("..") != std::string::npos)
        throw Error(idx + ": weight_map names file \"" + n + "\" outside the checkpoint directory");
      paths.push_back((fs::path(dir) / n).string());
    }
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("model-", 0) == 0 && n.find("-of-") != std::string::npos &&
          n.size() > 12 && n.substr(n.size() - 12) == ".safetensors")
        paths.push_back(e.path().string());
    }
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty())
    throw Error(dir + ": no model.safetensors, model.safetensors.index.json or model-*-of-*.safetensors found");
  ck.files.reserve(paths.size());
  for (const std::string& p : paths) ck.files.emplace_back(p);
  for (const SafetensorsFile& f : ck.files) {
    for (const auto& [name, view] : f.views()) {
      auto [it, inserted] = ck.views.emplace(name, &view);
      if (!inserted)
        throw Error(f.path() + ": tensor '" + name + "' also appears in " + *ck.file_of.at(name));
      ck.file_of[name] = &f.path();
    }
  }
  return ck;
}

bool is_float_dtype(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F8_E4M3;
}

// Checks presence, shape and dtype of `spec` (and of its FP8 scale); returns the view.
const SafetensorsView& check_tensor(const Checkpoint& ck, const TensorSpec& spec) {
  auto it = ck.views.find(spec.name);
  if (it == ck.views.end())
    throw Error(ck.describe_missing(spec.name) + " (config implies shape " + shape_str(spec.shape) + ")");
  const SafetensorsView& v = *it->second;
  const std::string& file = *ck.file_of.at(spec.name);
  if (v.shape != spec.shape)
    throw Error(file + ": tensor '" + spec.name + "' has shape " + shape_str(v.shape) + ", config implies " +
                shape_str(spec.shape));
  if (!is_float_dtype(v.dtype))
    throw Error(file + ": tensor '" + spec.name + "' has dtype " + dtype_name(v.dtype) +
                ", expected a weight dtype (BF16, F16, F32, F8_E4M3)");
  if (v.dtype == DType::F8_E4M3) {
    const std::string sname = spec.name + "_scale_inv";
    auto s = ck.views.find(sname);
    if (s == ck.views.end())
      throw Error(file + ": tensor '" + spec.name + "' is F8_E4M3 but its block scales '" + sname + "' are missing");
    if (spec.shape.size() != 2)
      throw Error(file + ": tensor '" + spec.name + "' is F8_E4M3 but not 2-D (block scales need [out, in])");
    std::vector<int64_t> want = {(spec.shape[0] + 127) / 128, (spec.shape[1] + 127) / 128};
    const SafetensorsView& sv = *s->second;
    if (sv.shape != want)
      throw Error(*ck.file_of.at(sname) + ": tensor '" + sname + "' has shape " + shape_str(sv.shape) +
                  ", expected " + shape_str(want) + " (128x128 blocks of " + shape_str(spec.shape) + ")");
    if (!is_float_dtype(sv.dtype) || sv.dtype == DType::F8_E4M3)
      throw Error(*ck.file_of.at(sname) + ": tensor '" + sname + "' has dtype " + dtype_name(sv.dtype) +
                  ", expected F32 (or BF16 / F16)");
  }
  return v;
}

// Converts checkpoint tensor `spec` to dtype `to` and writes it into `buf` at byte `offset`, in chunks
// (no full-size host copy). FP8 values are multiplied by their 128x128 block scale_inv. Non-finite
// values are an error naming the tensor.
void convert_into(const Checkpoint& ck, const TensorSpec& spec, DType to, Buffer& buf, size_t offset) {
  const SafetensorsView& v = *ck.views.at(spec.name);
  const std::string& file = *ck.file_of.at(spec.name);
  const SafetensorsView* scale = nullptr;
  int64_t cols = spec.shape.empty() ? 1 : spec.shape.back(), scale_cols = 0;
  if (v.dtype == DType::F8_E4M3) {
    scale = ck.views.at(spec.name + "_scale_inv");
    scale_cols = scale->shape[1];
  }
  const int64_t n = v.numel();
  const int64_t chunk = int64_t(1) << 20;
  std::vector<uint8_t> out(size_t(std::min(n, chunk)) * dtype_size(to));
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t m = std::min(chunk, n - base);
    for (int64_t k = 0; k < m; ++k) {
      const int64_t i = base + k;
      float x = read_element_as_float(v.dtype, v.data, i);
      if (scale) {
        const int64_t r = i / cols, c = i % cols;
        x *= read_element_as_float(scale->dtype, scale->data, (r / 128) * scale_cols + c / 128);
      }
      if (!std::isfinite(x))
        throw Error(file + ": tensor '" + spec.name + "' has a non-finite value (" + (std::isnan(x) ? "NaN" : "Inf") +
                    ") at element " + std::to_string(i));
      if (to == DType::F32) std::memcpy(out.data() + 4 * k, &x, 4);
      else {
        uint16_t b = float_to_bf16_bits(x);
        std::memcpy(out.data() + 2 * k, &b, 2);
      }
    }
    buf.upload(out.data(), size_t(m) * dtype_size(to), offset + size_t(base) * dtype_size(to));
  }
}

// Writes checkpoint tensor `spec` ([rows, cols]) as FP8 codes at byte `code_offset` of `buf` and its fp32
// 128x128 block scales at byte `scale_offset`. An F8_E4M3 tensor is copied as stored (codes and
// scale_inv as fp32); a BF16 / F16 / F32 one is quantized per block: scale = amax / 448 (1 for an
// all-zero block), code = e4m3(x / scale) (DeepSeek-V3's weight quantization). Non-finite values are
// an error naming the tensor.
void fp8_block_into(const Checkpoint& ck, const TensorSpec& spec, Buffer& buf, size_t code_offset, size_t scale_offset) {
  const SafetensorsView& v = *ck.views.at(spec.name);
  const std::string& file = *ck.file_of.at(spec.name);
  const BlockGeometry g = block_geometry(spec.shape);
  std::vector<float> scales(size_t(g.row_blocks() * g.col_blocks()));
  std::vector<uint8_t> codes(size_t(g.rows * g.cols));
  if (v.dtype == DType::F8_E4M3) {
    const SafetensorsView& sv = *ck.views.at(spec.name + "_scale_inv");
    for (size_t i = 0; i < scales.size(); ++i) {
      scales[i] = read_element_as_float(sv.dtype, sv.data, int64_t(i));
      if (!std::isfinite(scales[i]))
        throw Error(*ck.file_of.at(spec.name + "_scale_inv") + ": tensor '" + spec.name + "_scale_inv' has a non-finite value at element " + std::to_string(i));
    }
    std::memcpy(codes.data(), v.data, codes.size());
    for (size_t i = 0; i < codes.size(); ++i)
      if ((codes[i] & 0x7f) == 0x7f)
        throw Error(file + ": tensor '" + spec.name + "' has a NaN code at element " + std::to_string(i));
  } else {
    std::vector<float> x(codes.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = read_element_as_float(v.dtype, v.data, int64_t(i));
      if (!std::isfinite(x[i]))
        throw Error(file + ": tensor '" + spec.name + "' has a non-finite value (" + (std::isnan(x[i]) ? "NaN" : "Inf") +
                    ") at element " + std::to_string(i));
    }
    for (int64_t i = 0; i < int64_t(x.size()); ++i) {
      float& s = scales[size_t((i / g.cols / 128) * g.col_blocks() + (i % g.cols) / 128)];
      s = std::max(s, std::fabs(x[size_t(i)]));
    }
    for (float& s : scales) s = s > 0.f ? s / 448.f : 1.f;
    for (int64_t i = 0; i < int64_t(x.size()); ++i)
      codes[size_t(i)] = float_to_e4m3_bits(x[size_t(i)] / scales[size_t((i / g.cols / 128) * g.col_blocks() + (i % g.cols) / 128)]);
  }
  buf.upload(codes.data(), codes.size(), code_offset);
  buf.upload(scales.data(), scales.size() * 4, scale_offset);
}

}  // namespace

// ---- public: shared storage ----

std::string shared_mlp_target(const ModelConfig& cfg, const std::string& name) {
  static const std::string kPre = "model.layers.";
  if (name.rfind(kPre, 0) != 0) return "";
  size_t dot = name.find('.', kPre.size());
  if (dot == std::string::npos) return "";
  int layer = std::stoi(name.substr(kPre.size(), dot - kPre.size()));
  const std::string rest = name.substr(dot + 1);
  if (rest.rfind("mlp.", 0) != 0 || layer < 0 || layer >= int(cfg.layer_is_moe.size())) return "";
  const bool moe = cfg.layer_is_moe[layer];
  if (moe && rest.rfind("mlp.experts.", 0) != 0 && rest.rfind("mlp.shared_experts.", 0) != 0) return "";
  int first = -1;
  for (int i = 0; i < int(cfg.layer_is_moe.size()); ++i)
    if (cfg.layer_is_moe[i] == moe) {
      first = i;
      break;
    }
  if (first < 0 || first == layer) return "";
  return layer_prefix(first) + rest;
}

size_t estimate_weight_bytes(const ModelConfig& cfg, const WeightOptions& opt) {
  check_options(opt);
  size_t total = 0;
  for (const TensorSpec& s : stored_tensor_specs(cfg)) {
    if (opt.share_mlp_weights && !shared_mlp_target(cfg, s.name).empty()) continue;
    total += stored_bytes_of(s.shape, stored_dtype(s.name, s.shape, opt));
  }
  return total;
}

// ---- Weights ----

int64_t WeightTensor::numel() const { return numel_of(shape); }
int64_t WeightTensor::scale_numel() const {
  return dtype == DType::F8_E4M3 && shape.size() >= 2 ? block_geometry(shape).scales() : 0;
}

bool fp8_weight_name(const std::string& name) {
  auto ends_with = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  if (name.rfind("model.layers.", 0) != 0 || !ends_with("_proj.weight") && !ends_with("_proj_with_mqa.weight") &&
                                                 !ends_with(".wq_b.weight") && !ends_with(".wk.weight"))
    return false;
  return !ends_with("kv_b_proj.weight") && !ends_with("weights_proj.weight");
}

const WeightTensor& Weights::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw Error("weights: missing tensor " + name);
  return it->second;
}

void Weights::add(const std::string& name, WeightTensor t, Buffer storage) {
  require(tensors_.count(name) == 0, "weights: tensor " + name + " added twice");
  tensors_[name] = std::move(t);
  if (storage.bytes() > 0) storage_.push_back(std::move(storage));
}

void Weights::alias(const std::string& name, const std::string& target) {
  require(tensors_.count(name) == 0, "weights: tensor " + name + " added twice");
  tensors_[name] = get(target);
}

size_t Weights::stored_bytes() const {
  size_t n = 0;
  for (const Buffer& b : storage_) n += b.bytes();
  return n;
}

size_t Weights::logical_bytes() const {
  size_t n = 0;
  for (const auto& kv : tensors_) n += kv.second.bytes();
  return n;
}

// ---- loading ----

Weights load_weights(const ModelConfig& cfg, const std::string& dir, const WeightOptions& opt) {
  check_options(opt);
  Checkpoint ck = open_checkpoint(dir);
  // Validate every expected tensor (presence, shape, dtype, FP8 scales) before converting anything.
  std::map<std::string, TensorSpec> expected;
  for (const TensorSpec& s : expected_tensors(cfg)) {
    check_tensor(ck, s);
    expected.emplace(s.name, s);
  }

  Weights w;
  w.set_shared_mlp(opt.share_mlp_weights);
  for (const TensorSpec& s : stored_tensor_specs(cfg)) {
    if (opt.share_mlp_weights) {
      std::string target = shared_mlp_target(cfg, s.name);
      if (!target.empty()) {
        w.alias(s.name, target);
        continue;
      }
    }
    const DType dt = stored_dtype(s.name, s.shape, opt);
    const size_t bytes = stored_bytes_of(s.shape, dt);
    Buffer buf(opt.where, bytes, s.name);
    auto e = expected.find(s.name);
    if (dt == DType::F8_E4M3) {
      const BlockGeometry g = block_geometry(s.shape);
      const size_t per_codes = size_t(g.rows * g.cols), per_scales = size_t(g.row_blocks() * g.col_blocks());
      const std::string key = ".mlp.experts.";
      const size_t at = s.name.find(key);
      for (int64_t x = 0; x < g.mats; ++x) {
        const TensorSpec& src = e != expected.end() ? e->second
            : expected.at(s.name.substr(0, at + key.size()) + std::to_string(x) + "." + s.name.substr(at + key.size()));
        fp8_block_into(ck, src, buf, size_t(x) * per_codes, align16(size_t(g.numel())) + size_t(x) * per_scales * 4);
      }
      WeightTensor t;
      t.dtype = dt;
      t.shape = s.shape;
      t.data = buf.data();
      t.scale_inv = reinterpret_cast<const float*>(static_cast<const uint8_t*>(buf.data()) + align16(size_t(g.numel())));
      w.add(s.name, std::move(t), std::move(buf));
      continue;
    }
    if (e != expected.end()) {
      convert_into(ck, e->second, dt, buf, 0);
    } else {
      // Stacked experts: model.layers.N.mlp.experts.P.weight <- model.layers.N.mlp.experts.E.P.weight.
      const std::string key = ".mlp.experts.";
      const size_t at = s.name.find(key);
      require(at != std::string::npos, "weights: internal error, no source for " + s.name);
      const std::string head = s.name.substr(0, at + key.size()), proj = s.name.substr(at + key.size());
      const size_t per = bytes / size_t(s.shape[0]);
      for (int64_t x = 0; x < s.shape[0]; ++x)
        convert_into(ck, expected.at(head + std::to_string(x) + "." + proj), dt, buf, size_t(x) * per);
    }
    WeightTensor t;
    t.dtype = dt;
    t.shape = s.shape;
    t.data = buf.data();
    w.add(s.name, std::move(t), std::move(buf));
  }
  return w;
}

// ---- synthetic ----

SyntheticFill synthetic_fill_for(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed) {
  auto ends_with = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  SyntheticFill f;
  f.seed = seed;
  f.stream = name_stream(name);
  if (ends_with("norm.weight")) {  // input/post_attention/q_a/kv_a layernorm, indexer k_norm, model.norm
    f.scale = 0.1f;
    f.offset = 1.f;
  } else if (ends_with("norm.bias")) {
    f.scale = 0.1f;
  } else if (ends_with("e_score_correction_bias")) {
    f.scale = 0.01f;
  } else if (name == "model.embed_tokens.weight") {
    f.scale = 1.f;
  } else if (shape.size() >= 2) {  // [out, in] or [E, out, in]: unit-scale activations
    f.scale = 1.f / std::sqrt(float(shape.back()));
  } else {
    f.scale = 0.1f;
  }
  return f;
}

Weights synthetic_weights(const ModelConfig& cfg, uint64_t seed, const WeightOptions& opt) {
  check_options(opt);
  Weights w;
  w.set_shared_mlp(opt.share_mlp_weights);
  if (opt.where == Where::Device) {
    // Fail before thousands of allocations when the weights cannot fit.
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const size_t need = estimate_weight_bytes(cfg, opt);
    if (need > free_b)
      throw Error("synthetic weights for '" + cfg.name + "' need " + std::to_string(need >> 20) + " MiB on the GPU, " +
                  std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                  " MiB (try share_mlp_weights / --tp)");
  }
  for (const TensorSpec& s : stored_tensor_specs(cfg)) {
    if (opt.share_mlp_weights) {
      std::string target = shared_mlp_target(cfg, s.name);
      if (!target.empty()) {
        w.alias(s.name, target);
        continue;
      }
    }
    const DType dt = stored_dtype(s.name, s.shape, opt);
    const int64_t n = numel_of(s.shape);
    Buffer buf(opt.where, stored_bytes_of(s.shape, dt), s.name);
    const SyntheticFill f = synthetic_fill_for(s.name, s.shape, seed);
    WeightTensor t;
    if (dt == DType::F8_E4M3) {
      const BlockGeometry g = block_geometry(s.shape);
      uint8_t* codes = static_cast<uint8_t*>(buf.data());
      float* scales = reinterpret_cast<float*>(codes + align16(size_t(n)));
      if (opt.where == Where::Host) synthetic_fill_fp8_host(codes, scales, g.mats, g.rows, g.cols, f);
      else synthetic_fill_fp8_cuda(codes, scales, g.mats, g.rows, g.cols, f, nullptr);
      t.scale_inv = scales;
    } else if (opt.where == Where::Host) {
      synthetic_fill_host(buf.data(), dt, n, f);
    } else {
      synthetic_fill_cuda(buf.data(), dt, n, f, nullptr);
    }
    t.dtype = dt;
    t.shape = s.shape;
    t.data = buf.data();
    w.add(s.name, std::move(t), std::move(buf));
  }
  if (opt.where == Where::Device) CUDA_CHECK(cudaDeviceSynchronize());
  return w;
}

}  // namespace glm5
