// Safetensors reader and load_weights on malformed / mismatched checkpoints written to a temp dir:
// each gives the documented one-line error naming the file and tensor. Also FP8 block-scale
// dequantization and sharded checkpoints (with and without model.safetensors.index.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tests/shared_dir.h"
#include "tests/model/safetensors_writer.h"

namespace glm5 {
namespace {

namespace fs = std::filesystem;
using test::RawTensor;
using test::RawTensors;
using test::write_safetensors;
const std::string kGolden = glm5::test::golden_dir();

RawTensors read_golden() {
  SafetensorsFile f(kGolden + "/model.safetensors");
  RawTensors out;
  for (const auto& [name, v] : f.views())
    out[name] = {dtype_name(v.dtype), v.shape, std::vector<uint8_t>(v.data, v.data + v.nbytes)};
  return out;
}

// Writes raw bytes: 8-byte header length `len`, header text, then `data_bytes` zero bytes.
void write_raw(const std::string& path, uint64_t len, const std::string& header, size_t data_bytes) {
  std::ofstream o(path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(&len), 8);
  o.write(header.data(), std::streamsize(header.size()));
  std::string zeros(data_bytes, '\0');
  o.write(zeros.data(), std::streamsize(zeros.size()));
}

std::string dir_for(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("glm5_model_" + name)).string();
}

std::string fresh_dir(const std::string& name) {
  fs::path d = dir_for(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  ADD_FAILURE() << "no glm5::Error thrown";
  return "";
}

std::string open_error(uint64_t len, const std::string& header, size_t data_bytes) {
  const std::string p = fresh_dir("raw") + "/x.safetensors";
  write_raw(p, len, header, data_bytes);
  return error_of([&] { SafetensorsFile f(p); });
}

TEST(Safetensors, GoldenHeader) {
  SafetensorsFile f(kGolden + "/model.safetensors");
  EXPECT_EQ(f.tensors().size(), 149u);
  const SafetensorsView& v = f.get("lm_head.weight");
  EXPECT_EQ(v.dtype, DType::BF16);
  EXPECT_EQ(v.shape, (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(v.nbytes, 512u * 256 * 2);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(error_of([&] { f.get("nope"); }), kGolden + "/model.safetensors: no tensor 'nope'");
  SafetensorsFile e(kGolden + "/expected.safetensors");
  EXPECT_EQ(e.get("prompt_ids").dtype, DType::I32);
  EXPECT_EQ(read_element_as_float(DType::I32, e.get("prompt_ids").data, 0), 118.f);
}

TEST(SafetensorsErrors, Catalogue) {
  const std::string p = fs::path(::testing::TempDir()) / "glm5_model_raw/x.safetensors";
  {
    const std::string d = fresh_dir("raw");
    std::ofstream(d + "/x.safetensors") << "abc";
    EXPECT_EQ(error_of([&] { SafetensorsFile f(d + "/x.safetensors"); }),
              p + ": truncated safetensors file: 3 bytes, expected at least 8 (the header length)");
  }
  EXPECT_EQ(open_error(1000, "{}", 0), p + ": safetensors header length 1000 runs past the end of the file (10 bytes)");
  EXPECT_EQ(open_error(uint64_t(1) << 40, "{}", 0),
            p + ": safetensors header length 1099511627776 bytes is not sane (limit 100 MB); is this a safetensors file?");
  EXPECT_EQ(open_error(5, "{\"a\":", 0).rfind(p + ": safetensors header is not valid JSON (", 0), 0u);
  EXPECT_EQ(open_error(5, "{\"a\":", 0).find("json.exception"), std::string::npos);  // not the library's tag
  // A name listed twice (the last one won silently; session 16), also __metadata__; a nested duplicate is not one.
  const std::string dup = "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                          "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
  EXPECT_EQ(open_error(dup.size(), dup, 8), p + ": tensor 't' is listed twice in the safetensors header");
  const std::string meta2 = "{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"},\"t\":{\"dtype\":\"F32\",\"shape\":[1],"
                            "\"data_offsets\":[0,4]}}";
  {
    const std::string d = fresh_dir("meta2");
    write_raw(d + "/x.safetensors", meta2.size(), meta2, 4);
    EXPECT_NO_THROW(SafetensorsFile f(d + "/x.safetensors"));
  }
  EXPECT_EQ(open_error(2, "[]", 0), p + ": safetensors header must be a JSON object, got array");
  auto one = [](const std::string& entry) { return "{\"t\":" + entry + "}"; };
  auto hdr = [&](const std::string& entry, size_t data) {
    std::string h = one(entry);
    return open_error(h.size(), h, data);
  };
  EXPECT_EQ(hdr("{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}", 16),
            p + ": tensor 't': unsupported dtype \"F64\" (supported: BF16, F16, F32, F8_E4M3, I32, I64)");
  EXPECT_EQ(hdr("{\"dtype\":3,\"shape\":[2],\"data_offsets\":[0,16]}", 16), p + ": tensor 't': 'dtype' must be a string, got 3");
  EXPECT_EQ(hdr("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}", 8),
            p + ": tensor 't': 'shape' must be an array of non-negative integers, got [-2]");
  EXPECT_EQ(hdr("{\"dtype\":\"F32\",\"shape\":[2]}", 8),
            p + ": tensor 't': 'data_offsets' must be two non-negative integers [begin, end], got nothing");
  EXPECT_EQ(hdr("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 4),
            p + ": tensor 't': data_offsets [0, 8] run past the data section (4 bytes; file truncated?)");
  EXPECT_EQ(hdr("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}", 8),
            p + ": tensor 't': data_offsets [8, 0] have begin > end");
  EXPECT_EQ(hdr("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}", 8),
            p + ": tensor 't': data_offsets [0, 8] hold 8 bytes, but F32 shape [3] needs 12");
  EXPECT_EQ(hdr("[1,2]", 8), p + ": tensor 't': header entry must be an object, got [1,2]");
  std::string two =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
  EXPECT_EQ(open_error(two.size(), two, 12), p + ": tensor 'b' data [4, 12) overlaps tensor 'a' [0, 8)");
  // A valid minimal file, __metadata__ skipped.
  std::string ok = "{\"__metadata__\":{\"k\":\"v\"},\"t\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}";
  const std::string d = fresh_dir("ok");
  write_raw(d + "/x.safetensors", ok.size(), ok, 4);
  SafetensorsFile f(d + "/x.safetensors");
  EXPECT_EQ(f.tensors(), std::vector<std::string>{"t"});
  EXPECT_EQ(f.get("t").nbytes, 4u);
  EXPECT_EQ(error_of([] { SafetensorsFile f("/nonexistent/x.safetensors"); }).rfind(
                "/nonexistent/x.safetensors: cannot open safetensors file (", 0),
            0u);
}

// Writes golden tensors edited by `edit` into a fresh dir and returns load_weights' error.
std::string load_error(const std::string& name, const std::function<void(RawTensors&)>& edit) {
  RawTensors ts = read_golden();
  edit(ts);
  const std::string d = fresh_dir(name);
  write_safetensors(d + "/model.safetensors", ts);
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  return error_of([&] { load_weights(cfg, d, {Where::Host, DType::F32, false}); });
}

TEST(LoadWeightsErrors, Catalogue) {
  EXPECT_EQ(load_error("missing", [](RawTensors& t) { t.erase("model.layers.2.self_attn.o_proj.weight"); }),
            dir_for("missing") + "/model.safetensors: missing tensor 'model.layers.2.self_attn.o_proj.weight' (config implies shape "
                "[256, 256])");
  EXPECT_EQ(load_error("shape",
                       [](RawTensors& t) {
                         auto& x = t["model.layers.1.self_attn.q_b_proj.weight"];
                         x.shape = {96, 320};
                       }),
            dir_for("shape") + "/model.safetensors: tensor 'model.layers.1.self_attn.q_b_proj.weight' has shape [96, 320], config "
                "implies [320, 96]");
  EXPECT_EQ(load_error("dtype",
                       [](RawTensors& t) {
                         auto& x = t["model.norm.weight"];
                         x.dtype = "I32";
                         x.bytes.resize(x.bytes.size() * 2);
                       }),
            dir_for("dtype") + "/model.safetensors: tensor 'model.norm.weight' has dtype I32, expected a weight dtype (BF16, F16, F32, "
                "F8_E4M3)");
  EXPECT_EQ(load_error("nan",
                       [](RawTensors& t) {
                         auto& x = t["model.layers.3.mlp.experts.6.gate_proj.weight"];
                         x.bytes[2 * 10] = 0xc0;  // bf16 0x7fc0 = NaN (little-endian: low byte first)
                         x.bytes[2 * 10 + 1] = 0x7f;
                       }),
            dir_for("nan") + "/model.safetensors: tensor 'model.layers.3.mlp.experts.6.gate_proj.weight' has a non-finite value "
                "(NaN) at element 10");
  EXPECT_EQ(load_error("inf",
                       [](RawTensors& t) {
                         auto& x = t["lm_head.weight"];
                         x.bytes[0] = 0x80;  // bf16 0xff80 = -Inf
                         x.bytes[1] = 0xff;
                       }),
            dir_for("inf") + "/model.safetensors: tensor 'lm_head.weight' has a non-finite value (Inf) at element 0");
  EXPECT_EQ(load_error("fp8noscale",
                       [](RawTensors& t) {
                         auto& x = t["model.layers.0.self_attn.o_proj.weight"];
                         x.dtype = "F8_E4M3";
                         x.bytes.resize(x.bytes.size() / 2);
                       }),
            dir_for("fp8noscale") + "/model.safetensors: tensor 'model.layers.0.self_attn.o_proj.weight' is F8_E4M3 but its block scales "
                "'model.layers.0.self_attn.o_proj.weight_scale_inv' are missing");
  const std::string empty = fresh_dir("empty");
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  EXPECT_EQ(error_of([&] { load_weights(cfg, empty, {}); }),
            empty + ": no model.safetensors, model.safetensors.index.json or model-*-of-*.safetensors found");
  EXPECT_EQ(error_of([&] { load_weights(cfg, "/nonexistent/dir", {}); }),
            "/nonexistent/dir: weights directory does not exist");
  // Truncated checkpoint: the last tensor runs past the end.
  {
    const std::string t = fresh_dir("trunc");
    fs::copy_file(kGolden + "/model.safetensors", t + "/model.safetensors");
    fs::resize_file(t + "/model.safetensors", fs::file_size(t + "/model.safetensors") - 100);
    std::string m = error_of([&] { load_weights(cfg, t, {}); });
    EXPECT_EQ(m.rfind(t + "/model.safetensors: tensor '", 0), 0u) << m;
    EXPECT_NE(m.find("run past the data section"), std::string::npos) << m;
  }
  // A config that disagrees with the checkpoint (more experts) names the first missing expert.
  ModelConfig more = cfg;
  more.n_routed_experts = 16;
  EXPECT_EQ(error_of([&] { load_weights(more, kGolden, {}); }),
            kGolden + "/model.safetensors: tensor 'model.layers.1.mlp.gate.weight' has shape [8, 256], config implies "
                      "[16, 256]");
}

// FP8 E4M3 weights with 128x128 block scale_inv are dequantized: w = fp8 * scale_inv[r/128][c/128].
TEST(LoadWeights, Fp8BlockScalesDequantized) {
  RawTensors ts = read_golden();
  const std::string name = "model.layers.0.mlp.gate_proj.weight";  // [512, 256] -> scales [4, 2]
  RawTensor& w = ts[name];
  ASSERT_EQ(w.shape, (std::vector<int64_t>{512, 256}));
  const int64_t rows = 512, cols = 256;
  std::vector<float> scale(4 * 2);
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = 0.001f * float(i + 1);
  RawTensor fp8{"F8_E4M3", w.shape, std::vector<uint8_t>(size_t(rows * cols))};
  std::vector<float> want(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      uint16_t b;
      std::memcpy(&b, &w.bytes[2 * i], 2);
      const float s = scale[(r / 128) * 2 + c / 128];
      const uint8_t q = float_to_e4m3_bits(bf16_bits_to_float(b) / s);
      fp8.bytes[i] = q;
      want[i] = e4m3_bits_to_float(q) * s;
    }
  RawTensor sc{"F32", {4, 2}, std::vector<uint8_t>(scale.size() * 4)};
  std::memcpy(sc.bytes.data(), scale.data(), sc.bytes.size());
  ts[name] = fp8;
  ts[name + "_scale_inv"] = sc;
  const std::string d = fresh_dir("fp8");
  write_safetensors(d + "/model.safetensors", ts);
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  Weights wt = load_weights(cfg, d, {Where::Host, DType::F32, false});
  const float* got = static_cast<const float*>(wt.get(name).data);
  int bad = 0;
  for (int64_t i = 0; i < rows * cols; ++i) bad += got[i] != want[i];
  EXPECT_EQ(bad, 0);
  // Wrong scale shape is an error naming the scale tensor.
  ts[name + "_scale_inv"].shape = {2, 4};
  write_safetensors(d + "/model.safetensors", ts);
  EXPECT_EQ(error_of([&] { load_weights(cfg, d, {}); }),
            d + "/model.safetensors: tensor '" + name + "_scale_inv' has shape [2, 4], expected [4, 2] (128x128 blocks of "
                "[512, 256])");
}

TEST(LoadWeights, ShardedWithAndWithoutIndex) {
  RawTensors ts = read_golden();
  RawTensors a, b;
  int k = 0;
  for (auto& [n, t] : ts) (k++ % 2 ? a : b)[n] = t;
  const std::string d = fresh_dir("shards");
  write_safetensors(d + "/model-00001-of-00002.safetensors", a);
  write_safetensors(d + "/model-00002-of-00002.safetensors", b);
  ModelConfig cfg = builtin_model_config("glm5-tiny");
  Weights ref = load_weights(cfg, kGolden, {});
  auto same = [&](const Weights& w) {
    ASSERT_EQ(w.tensors().size(), ref.tensors().size());
    for (const auto& [n, t] : ref.tensors()) {
      ASSERT_TRUE(w.has(n)) << n;
      EXPECT_EQ(0, std::memcmp(w.get(n).data, t.data, t.bytes())) << n;
    }
  };
  same(load_weights(cfg, d, {}));
  nlohmann::json idx;
  idx["metadata"] = {{"total_size", 0}};
  for (auto& [n, t] : a) idx["weight_map"][n] = "model-00001-of-00002.safetensors";
  for (auto& [n, t] : b) idx["weight_map"][n] = "model-00002-of-00002.safetensors";
  std::ofstream(d + "/model.safetensors.index.json") << idx.dump();
  same(load_weights(cfg, d, {}));
  // The same tensor in two shards is an error.
  b["lm_head.weight"] = ts["lm_head.weight"];
  a["lm_head.weight"] = ts["lm_head.weight"];
  write_safetensors(d + "/model-00001-of-00002.safetensors", a);
  write_safetensors(d + "/model-00002-of-00002.safetensors", b);
  std::string m = error_of([&] { load_weights(cfg, d, {}); });
  EXPECT_NE(m.find("tensor 'lm_head.weight' also appears in"), std::string::npos) << m;
  // A missing tensor in a sharded checkpoint names the directory.
  a.erase("lm_head.weight");
  b.erase("lm_head.weight");
  write_safetensors(d + "/model-00001-of-00002.safetensors", a);
  write_safetensors(d + "/model-00002-of-00002.safetensors", b);
  EXPECT_EQ(error_of([&] { load_weights(cfg, d, {}); }),
            d + ": missing tensor 'lm_head.weight' (in none of 2 shards) (config implies shape [512, 256])");
}

}  // namespace
}  // namespace glm5
