#include "cli/compare_cli.h"

#include <cstdio>

namespace glm5 {

CLI::App* add_compare_subcommand(CLI::App& app, CompareOptions& c) {
  CLI::App* s = app.add_subcommand("compare", "sweep the three KV paths over context, pool and batch lists; "
                                              "one comparison report (compare.md / compare.json) with crossovers");
  c.base.out_dir = "glm5prof-compare";
  s->add_option("--context", c.contexts, "context lengths, e.g. 4096,32768,131072")->delimiter(',')->required()
      ->check(CLI::Range(0, 1 << 30));
  s->add_option("--pool-tokens", c.pools, "KV pool capacities, e.g. 131072,495000")->delimiter(',')->required()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  s->add_option("--batch", c.batches, "batch sizes, e.g. 1,32")->delimiter(',')->required()->check(CLI::Range(1, 4096));
  s->add_option("--model", c.base.model, "glm5 | glm5-tiny | deepseek-v3 | PATH/config.json");
  s->add_option("--weights", c.base.weights, "synthetic | checkpoint folder")->capture_default_str();
  s->add_option("--weights-dtype", c.base.weights_dtype, "bf16 | fp8 (block-scaled FP8 projections and experts)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp8"}));
  s->add_option("--backend", c.base.backend, "auto | cuda | cpu")->capture_default_str()->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  s->add_option("--steps", c.base.steps, "measured decode steps per point")->capture_default_str()->check(CLI::Range(1, 1000));
  s->add_option("--warmup", c.base.warmup, "untraced steps first")->capture_default_str()->check(CLI::Range(0, 1000));
  s->add_option("--seed", c.base.seed, "synthetic weights, KV and tokens")->capture_default_str();
  s->add_option("--share-mlp", c.base.share_mlp, "auto | on | off")->capture_default_str()->check(CLI::IsMember({"auto", "on", "off"}));
  s->add_option("--tp", c.base.tp, "tensor/expert-parallel ranks (see profile --tp)")->capture_default_str()->check(CLI::Range(1, 64));
  s->add_option("--rank", c.base.rank, "profile only this rank's shard")->check(CLI::Range(0, 63));
  s->add_option("--out", c.base.out_dir, "output folder (compare.md, compare.json, points/<name>/)")->capture_default_str();
  return s;
}

int run_compare_cli(const CompareOptions& c) {
  std::printf("%s", run_compare(c).c_str());
  return 0;
}

}  // namespace glm5
