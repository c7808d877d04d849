#include "cli/diff_cli.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <filesystem>

#include "cli/cli_checks.h"
#include "analysis/diff.h"
#include "common/error.h"
#include "report/diff_input.h"
#include "trace/atomic_file.h"

namespace glm5 {


CLI::App* add_diff_subcommand(CLI::App& app, DiffCliArgs& a) {
  CLI::App* d = app.add_subcommand("diff", "regression report between two report.json files (or two traces); "
                                           "exit 0 no regression, 1 regression, 2 bad input");
  d->add_option("base", a.base, "baseline report.json or trace")->required();
  d->add_option("new", a.now, "new report.json or trace")->required();
  d->add_option("--threshold", a.threshold_pct, "smallest relative change that counts [%] (default 3)")->check(number_in(0, 1000, false, "[0, 1000]"));
  d->add_option("--alpha", a.alpha, "one-sided Mann-Whitney significance for step samples (default 0.05)")->check(number_in(0, 1, true, "(0, 1]"));
  d->add_option("--min-abs-us", a.min_abs_us, "smallest absolute change per step that counts [us] (default 1)")->check(number_in(0, 1e9, false, "[0, 1e9]"));
  d->add_option("--gate", a.gate, "metric groups that gate the exit status: step, op, layer, kernel, appeared (default step,appeared)")
      ->delimiter(',')
      ->check(CLI::IsMember({"step", "op", "layer", "kernel", "appeared"}));
  d->add_option("--config", a.config, "JSON file with threshold_pct, alpha, min_abs_us, min_share, gate")->check(non_empty());
  d->add_option("--md", a.md_out, "also write the Markdown summary here (e.g. $GITHUB_STEP_SUMMARY)")->check(non_empty());
  d->add_option("--json", a.json_out, "also write the JSON result here")->check(non_empty());
  d->add_option("--junit", a.junit_out, "also write JUnit XML here (one test case per gated metric)")->check(non_empty());
  return d;
}

int run_diff_cli(const DiffCliArgs& a) {
  try {
    DiffOptions o;
    if (!a.config.empty()) o = load_diff_options(a.config, o);
    if (a.threshold_pct >= 0) o.threshold_pct = a.threshold_pct;
    if (a.alpha >= 0) o.alpha = a.alpha;
    if (a.min_abs_us >= 0) o.min_abs_us = a.min_abs_us;
    if (!a.gate.empty()) o.gate = a.gate;
    for (const std::string* p : {&a.md_out, &a.json_out, &a.junit_out}) {
      if (p->empty()) continue;
      check_output_dir(std::filesystem::path(*p).parent_path().empty() ? "." : std::filesystem::path(*p).parent_path().string());
    }
    // An output naming an input would overwrite the base (or new) report it was compared with.
    require_outputs_not_inputs({a.md_out, a.json_out, a.junit_out}, {a.base, a.now, a.config}, "--md / --json / --junit path");
    DiffResult d = diff_reports(load_report_or_trace(a.base), load_report_or_trace(a.now), o, a.base, a.now);
    const std::string md = diff_to_markdown(d, o);
    AtomicOutputs files;  // every requested output or none
    if (!a.md_out.empty()) files.stage(a.md_out, md);
    if (!a.json_out.empty()) files.stage(a.json_out, diff_to_json(d, o).dump(2) + "\n");
    if (!a.junit_out.empty()) files.stage(a.junit_out, diff_to_junit(d));
    files.commit();
    std::printf("%s", md.c_str());
    return d.regression ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "glm5prof: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace glm5
