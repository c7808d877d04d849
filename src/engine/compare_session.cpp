#include "engine/compare_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "common/error.h"
#include "model/config.h"
#include "report/report.h"
#include "trace/atomic_file.h"

namespace glm5 {

using json = nlohmann::json;

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void progress(bool on, size_t done, size_t total, const std::string& what) {
  if (!on) return;
  const int width = 30, filled = int(width * done / std::max<size_t>(total, 1));
  std::fprintf(stderr, "\r[%s%s] %zu/%zu %-50s", std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
               done, total, what.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace

json find_crossovers(const json& points) {
  json out = json::array();
  // Series along context (batch, pool fixed) and along pool (batch, context fixed).
  for (const char* along : {"context", "pool_tokens"}) {
    const char* other = std::string(along) == "context" ? "pool_tokens" : "context";
    std::map<std::pair<int64_t, int64_t>, std::vector<const json*>> series;
    for (const json& p : points)
      if (p.contains("winner")) series[{p["batch"].get<int64_t>(), p[other].get<int64_t>()}].push_back(&p);
    for (auto& [key, v] : series) {
      std::sort(v.begin(), v.end(), [&](const json* a, const json* b) { return (*a)[along] < (*b)[along]; });
      // A winner by less than 3% is a tie within step-to-step noise: no crossover is claimed for it.
      for (size_t i = 1; i < v.size(); ++i)
        if ((*v[i])["winner"] != (*v[i - 1])["winner"] && (*v[i]).value("margin", 1.0) >= 0.03 &&
            (*v[i - 1]).value("margin", 1.0) >= 0.03)
          out.push_back({{"along", along}, {"batch", key.first}, {other, key.second},
                         {"from", (*v[i - 1])[along]}, {"to", (*v[i])[along]},
                         {"winner_before", (*v[i - 1])["winner"]}, {"winner_after", (*v[i])["winner"]}});
    }
  }
  return out;
}

std::string run_compare(const CompareOptions& c) {
  require(!c.contexts.empty() && !c.pools.empty() && !c.batches.empty(),
          "compare: --context, --pool-tokens and --batch each need at least one value");
  check_output_dir(c.base.out_dir);
  namespace fs = std::filesystem;
  if (!c.base.model.empty())
    require_outputs_not_inputs({(fs::path(c.base.out_dir) / "compare.json").string(),
                                (fs::path(c.base.out_dir) / "compare.md").string()},
                               model_config_inputs(c.base.model), "--out folder");
  const bool bar = c.progress && isatty(STDERR_FILENO);
  size_t total = c.contexts.size() * c.pools.size() * c.batches.size(), done = 0;
  json points = json::array();
  json device, model;
  // The points' reports are written into a staging folder and moved to <out>/points only once compare.json and
  // compare.md are in place, so a sweep that fails or is killed part way leaves no half sweep under points/ (bad-input
  // review, session 29: a killed 200,000-point sweep left points/ without compare.json). A staging folder left by a
  // killed run is removed when the next run starts; the guard removes it when this one throws.
  const fs::path out_dir(c.base.out_dir), staging = out_dir / ".points.partial", points_dir = out_dir / "points";
  std::error_code ec;
  fs::remove_all(staging, ec);
  struct RemoveStaging {
    fs::path dir;
    ~RemoveStaging() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } remove_staging{staging};
  auto point_name = [](int b, int ctx, int64_t pool) {
    std::string name = "b";  // (appended: GCC 12's -Wrestrict misfires on "b" + std::to_string(b) in a lambda)
    name += std::to_string(b);
    name += "-ctx" + std::to_string(ctx);
    name += "-pool" + std::to_string(pool);
    return name;
  };
  // Pre-flight: every point's options checked as usage before the first point runs (ProfileOptions::validate_only),
  // so a value no point can take (--context beyond max_position_embeddings) is one usage error (exit 2) naming the
  // point, not minutes of sweep ending in "every point skipped" (bad-input review, session 29). What only a run can
  // tell (the pool does not fit the GPU) still skips that point and the sweep goes on.
  auto point_options = [&c](int b, int ctx, int64_t pool) {
    ProfileOptions o = c.base;
    o.batch = b;
    o.context = ctx;
    o.pool_tokens = pool;
    return o;
  };
  for (int b : c.batches)
    for (int64_t pool : c.pools)
      for (int ctx : c.contexts) {
        ProfileOptions o = point_options(b, ctx, pool);
        o.validate_only = true;
        try {
          run_profile(o);
        } catch (const UsageError& e) {
          throw UsageError("compare: point " + point_name(b, ctx, pool) + ": " + e.what());
        }
      }
  for (int b : c.batches)
    for (int64_t pool : c.pools)
      for (int ctx : c.contexts) {
        const std::string name = point_name(b, ctx, pool);
        progress(bar, done, total, name);
        ProfileOptions o = point_options(b, ctx, pool);
        o.quiet = true;
        o.out_dir = (staging / name).string();
        json p = {{"name", name}, {"batch", b}, {"context", ctx}, {"pool_tokens", pool}};
        try {
          ReportInput r;
          run_profile(o, &r);
          device = r.device;
          model = r.model;
          json paths = json::object();
          std::string winner;
          double best = 0, second = 0;
          for (const RunReport& run : r.runs) {
            const Analysis& a = run.analysis;
            paths[run.name] = {{"step_us", a.step_median_us},
                               {"attention_us", a.attention_us},
                               {"cast_us", a.cast_us},
                               {"cast_share", a.step_median_us > 0 ? a.cast_us / a.step_median_us : 0.0}};
            if (winner.empty() || a.step_median_us < best) {
              second = winner.empty() ? 0 : best;
              winner = run.name;
              best = a.step_median_us;
            } else if (second == 0 || a.step_median_us < second) {
              second = a.step_median_us;
            }
          }
          p["paths"] = paths;
          p["winner"] = winner;
          p["margin"] = best > 0 && second > 0 ? second / best - 1 : 0.0;  // runner-up slower by this fraction
        } catch (const OutputError&) {
          throw;  // a full disk or an unwritable folder fails the sweep (no outputs), it does not skip the point
        } catch (const std::exception& e) {
          p["skipped"] = e.what();  // e.g. the pool cannot hold batch x context: the sweep goes on
        }
        points.push_back(p);
        progress(bar, ++done, total, name);
      }
  // A sweep in which every point was refused measured nothing: an error naming why (the first point's reason),
  // not an empty comparison and exit 0.
  if (!points.empty() && std::all_of(points.begin(), points.end(), [](const json& p) { return p.contains("skipped"); }))
    throw Error("compare: every point of the sweep was skipped (" + std::to_string(points.size()) +
                " points); the first: " + points[0]["skipped"].get<std::string>());
  json out = {{"schema_version", "glm5prof.compare/1"},
              {"device", device},
              {"model", model},
              {"steps", c.base.steps},
              {"tp", c.base.tp},
              {"rank", c.base.rank},
              {"points", points},
              {"crossovers", find_crossovers(points)}};
  std::ostringstream md;
  md << "# glm5prof compare\n\n";
  md << "Step time per KV path [µs] (median of " << c.base.steps << " steps); the cast's share of the step in "
     << "parentheses; the winner in bold.\n\n";
  md << "| batch | context | pool | cast | gather-cast | fp8 | winner |\n|---:|---:|---:|---:|---:|---:|---|\n";
  for (const json& p : points) {
    md << "| " << p["batch"] << " | " << p["context"] << " | " << p["pool_tokens"] << " | ";
    if (p.contains("skipped")) {
      md << "skipped: " << p["skipped"].get<std::string>() << " | | | |\n";
      continue;
    }
    for (const char* path : {"cast", "gather-cast", "fp8"}) {
      if (!p["paths"].contains(path)) {
        md << "- | ";
        continue;
      }
      const json& q = p["paths"][path];
      std::string cell = fmt("%.1f", q["step_us"].get<double>()) + " (" + fmt("%.0f%%", 100 * q["cast_share"].get<double>()) + ")";
      md << (p["winner"] == path ? "**" + cell + "**" : cell) << " | ";
    }
    md << p["winner"].get<std::string>() << " |\n";
  }
  md << "\nCrossovers (where the fastest path changes):\n\n";
  if (out["crossovers"].empty()) md << "- none in this sweep\n";
  for (const json& x : out["crossovers"])
    md << "- batch " << x["batch"] << ", along " << x["along"].get<std::string>() << " " << x["from"] << " → " << x["to"]
       << ": " << x["winner_before"].get<std::string>() << " → " << x["winner_after"].get<std::string>() << "\n";
  create_output_dir(c.base.out_dir);
  AtomicOutputs files;  // both or neither
  files.stage((fs::path(c.base.out_dir) / "compare.json").string(), out.dump(2) + "\n");
  files.stage((fs::path(c.base.out_dir) / "compare.md").string(), md.str());
  files.commit();
  // Then the points' folders replace the previous run's (a rename within one folder: the old ones are removed first,
  // as a new sweep's points may differ from the old one's).
  fs::remove_all(points_dir, ec);
  if (ec) throw Error("compare: cannot replace '" + points_dir.string() + "': " + ec.message());
  if (fs::exists(staging, ec)) {
    fs::rename(staging, points_dir, ec);
    if (ec) throw Error("compare: cannot move the points' reports to '" + points_dir.string() + "': " + ec.message());
  }
  return md.str();
}

}  // namespace glm5
