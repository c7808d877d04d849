#include "cli/compare_cli.h"
#include "cli/cli_checks.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace glm5 {

namespace {

// A comma-separated list of integers in [lo, hi], each listed once. Parsed here rather than by CLI11's delimiter,
// which drops empty items silently ("--context 128,,256", "--context 128,"), and checked for repeats (two points
// of one value would run twice and share one output folder); bad-input review, session 16. Throws
// CLI::ValidationError (exit 2) naming the option and the item.
template <typename T>
std::vector<T> parse_list(const char* flag, const std::string& text, T lo, T hi) {
  std::vector<T> out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty()) throw CLI::ValidationError(flag, "empty item in '" + text + "' (expected integers separated by commas)");
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < (long long)lo || v > (long long)hi)
      throw CLI::ValidationError(flag, "'" + item + "' is not an integer in [" + std::to_string(lo) + ", " +
                                           std::to_string(hi) + "]");
    if (std::find(out.begin(), out.end(), T(v)) != out.end())
      throw CLI::ValidationError(flag, "lists " + item + " twice");
    out.push_back(T(v));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& c) {
  CLI::App* s = app.add_subcommand("compare", "sweep the three KV paths over context, pool and batch lists; "
                                              "one comparison report (compare.md / compare.json) with crossovers");
  c.base.out_dir = "glm5prof-compare";
  // (strings here, parsed into c.contexts / c.pools / c.batches once the command line is complete)
  auto lists = std::make_shared<std::array<std::string, 3>>();
  s->add_option("--context", (*lists)[0], "context lengths, e.g. 4096,32768,131072")->required();
  s->add_option("--pool-tokens", (*lists)[1], "KV pool capacities, e.g. 131072,495000")->required();
  s->add_option("--batch", (*lists)[2], "batch sizes, e.g. 1,32")->required();
  s->add_option("--model", c.base.model, "glm5 | glm5-tiny | deepseek-v3 | PATH/config.json")->check(non_empty());
  s->add_option("--weights", c.base.weights, "synthetic | checkpoint folder")->capture_default_str();
  s->add_option("--weights-dtype", c.base.weights_dtype, "bf16 | fp8 (block-scaled FP8 projections and experts)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp8"}));
  s->add_option("--backend", c.base.backend, "auto | cuda | cpu")->capture_default_str()->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  s->add_option("--steps", c.base.steps, "measured decode steps per point")->capture_default_str()->check(CLI::Range(1, 1000));
  s->add_option("--warmup", c.base.warmup, "untraced steps first")->capture_default_str()->check(CLI::Range(0, 1000));
  s->add_option("--seed", c.base.seed, "synthetic weights, KV and tokens")->capture_default_str()
      ->check(kNonNegativeInteger);
  s->add_option("--share-mlp", c.base.share_mlp, "auto | on | off")->capture_default_str()->check(CLI::IsMember({"auto", "on", "off"}));
  s->add_option("--tp", c.base.tp, "tensor/expert-parallel ranks (see profile --tp)")->capture_default_str()->check(CLI::Range(1, 64));
  s->add_option("--rank", c.base.rank, "profile only this rank's shard")->check(CLI::Range(0, 63));
  s->add_option("--out", c.base.out_dir, "output folder (compare.md, compare.json, points/<name>/)")->capture_default_str()->check(non_empty());
  s->parse_complete_callback([&c, lists] {
    c.contexts = parse_list<int>("--context", (*lists)[0], 0, 1 << 30);
    c.pools = parse_list<int64_t>("--pool-tokens", (*lists)[1], 1, int64_t(1) << 40);
    c.batches = parse_list<int>("--batch", (*lists)[2], 1, 4096);
    // Each point runs the three KV paths (seconds on the GPU, more on the CPU): a sweep beyond this many points is a
    // typo, not a plan, and would run for hours or days (bad-input review, session 29: 200,000 points).
    constexpr size_t kMaxPoints = 1024;
    const size_t points = c.contexts.size() * c.pools.size() * c.batches.size();
    if (points > kMaxPoints)
      throw CLI::ValidationError("--context x --pool-tokens x --batch", std::to_string(points) + " points (" +
                                     std::to_string(c.contexts.size()) + " x " + std::to_string(c.pools.size()) + " x " +
                                     std::to_string(c.batches.size()) + "), expected at most " + std::to_string(kMaxPoints));
  });
  return s;
}

int run_compare_cli(const CompareOptions& c) {
  std::printf("%s", run_compare(c).c_str());
  return 0;
}

}  // namespace glm5
