// `glm5prof compare`: the three KV paths swept over context lengths, pool capacities, batch sizes
// (and --tp shards), one `profile` per point (its trace and report kept in OUT/points/<name>/), and one
// comparison report: per point the step, attention and cast time and the cast's share per path, the
// winner, and the crossovers (where the winning path changes along context or pool size).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/profile_session.h"

namespace glm5 {

struct CompareOptions {
  ProfileOptions base;            // model, backend, steps, warmup, tp/rank, ... (out_dir = the sweep's folder)
  std::vector<int> contexts;      // tokens cached per request
  std::vector<int64_t> pools;     // KV pool capacity per layer
  std::vector<int> batches;
  bool progress = true;           // a progress line on stderr when it is a terminal
};

// Runs the sweep; writes OUT/compare.json (schema glm5prof.compare/1) and OUT/compare.md. Returns the
// Markdown. Throws glm5::Error for bad options (empty lists, a point that cannot fit is reported as
// skipped with its reason, not fatal).
std::string run_compare(const CompareOptions& opt);

// The crossovers of a compare.json "points" list (exposed for tests): for every series (same batch
// and pool, or same batch and context), the consecutive points where the winning path changes.
nlohmann::json find_crossovers(const nlohmann::json& points);

}  // namespace glm5
