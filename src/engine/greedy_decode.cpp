#include "engine/greedy_decode.h"

#include <cmath>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "engine/decode_engine.h"

namespace glm5 {

namespace {

// Feeds the prompt, then decodes (teacher-forced when `forced` is given) on one engine.
GreedyDecodeResult run_greedy(DecodeEngine& engine, const std::vector<int32_t>& prompt, int new_tokens,
                              const std::vector<int32_t>& forced) {
  GreedyDecodeResult r;
  std::vector<float> logits;
  std::vector<int32_t> next;
  for (size_t i = 0; i < prompt.size(); ++i)
    next = engine.step({prompt[i]}, i + 1 == prompt.size() ? &logits : nullptr);
  uint64_t h = 0xcbf29ce484222325ull;
  auto hash = [&](const std::vector<float>& v) {
    for (float f : v) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      for (int b = 0; b < 4; ++b) h = (h ^ ((u >> (8 * b)) & 0xffu)) * 0x100000001b3ull;
    }
  };
  for (int k = 0; k < new_tokens; ++k) {
    r.generated.push_back(next[0]);
    r.logits.push_back(logits);
    hash(logits);
    if (k + 1 == new_tokens) break;
    int32_t feed = forced.empty() ? next[0] : forced[k];
    next = engine.step({feed}, &logits);
  }
  r.logits_hash = h;
  return r;
}

EngineOptions decode_options(Backend backend, KvPath kv_path, const std::vector<int32_t>& prompt, int new_tokens,
                             const std::vector<int32_t>& forced, ActivationPrecision precision) {
  require(!prompt.empty(), "decode: the prompt is empty");
  require(new_tokens >= 1, "decode: --new-tokens must be at least 1, got " + std::to_string(new_tokens));
  require(forced.empty() || int(forced.size()) >= new_tokens - 1,
          "decode: teacher forcing needs " + std::to_string(new_tokens - 1) + " tokens, got " + std::to_string(forced.size()));
  EngineOptions opt;
  opt.backend = backend;
  opt.kv_path = kv_path;
  opt.batch = 1;
  opt.max_seq_len = int(prompt.size()) + new_tokens;
  opt.precision = precision;
  return opt;
}

}  // namespace

GreedyDecodeResult greedy_decode(const ModelConfig& cfg, const Weights& weights, Backend backend, KvPath kv_path,
                                 const std::vector<int32_t>& prompt, int new_tokens,
                                 const std::vector<int32_t>& forced, ActivationPrecision precision) {
  EngineOptions opt = decode_options(backend, kv_path, prompt, new_tokens, forced, precision);
  OpTracer none;
  DecodeEngine engine(cfg, weights, opt, none);
  return run_greedy(engine, prompt, new_tokens, forced);
}

GreedyDecodeResult greedy_decode_parallel(const ModelConfig& cfg, const std::vector<const Weights*>& weights,
                                          Backend backend, KvPath kv_path, const std::vector<int32_t>& prompt,
                                          int new_tokens, const std::vector<Communicator*>& comms,
                                          const std::vector<int32_t>& forced, ActivationPrecision precision) {
  const size_t n = comms.size();
  require(n >= 1 && weights.size() == n, "decode: one Weights per rank needed");
  EngineOptions base = decode_options(backend, kv_path, prompt, new_tokens, forced, precision);
  std::vector<GreedyDecodeResult> results(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        if (backend == Backend::Cuda) CUDA_CHECK(cudaSetDevice(int(r)));
        EngineOptions opt = base;
        opt.comm = comms[r];
        OpTracer none;
        DecodeEngine engine(cfg, *weights[r], opt, none);
        results[r] = run_greedy(engine, prompt, new_tokens, forced);
      } catch (const std::exception& e) {
        errors[r] = e.what();  // a failed rank leaves the others blocked in a collective: reported below
      }
    });
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < n; ++r) require(errors[r].empty(), "rank " + std::to_string(r) + ": " + errors[r]);
  return results[0];
}

int argmax_index(const std::vector<float>& v) {
  int best = 0;
  for (int i = 1; i < int(v.size()); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

float top1_margin(const std::vector<float>& v) {
  float a = -INFINITY, b = -INFINITY;
  for (float x : v) {
    if (x > a) {
      b = a;
      a = x;
    } else if (x > b) {
      b = x;
    }
  }
  return a - b;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  require(a.size() == b.size(), "relative_error: sizes differ");
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace glm5
