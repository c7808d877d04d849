#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "report/report.h"
#include "synthetic.h"
#include "trace/atomic_file.h"

namespace glm5 {
namespace {

namespace fs = std::filesystem;

ReportInput three_paths() {
  ReportInput in;
  in.run_spec = {{"model", "glm5-tiny"}, {"batch", 1}, {"context", 4096}};
  in.device = {{"name", "NVIDIA H200"}, {"copy_gbps", 4000}};
  in.model = {{"layers", 2}};
  in.memory_fit = {{"shared_experts", true}};
  std::vector<std::pair<std::string, Analysis>> runs = {
      {"cast", analyze(test::decode_run(2, 300, 30), Peaks{4000, 900})},
      {"gather-cast", analyze(test::decode_run(2, 20, 30), Peaks{4000, 900})},
      {"fp8", analyze(test::decode_run(2, 0, 35), Peaks{4000, 900})}};
  for (auto& [name, a] : runs) in.runs.push_back({name, {{"kv_path", name}}, a});
  in.comparison = compare_paths(runs);
  return in;
}

TEST(Report, JsonHasSchemaVersionAndSections) {
  const fs::path dir = fs::temp_directory_path() / ("glm5_report_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "report.json").string();
  write_report_json(three_paths(), path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema_version"], "glm5prof.report/1");
  EXPECT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][0]["hotspots"][0]["kind"], "kv_dtype_cast");
  EXPECT_EQ(j["runs"][0]["steps"]["samples"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["layer_ops"].size(), 8u);
  EXPECT_EQ(j["comparison"]["winner"], "fp8");
  EXPECT_EQ(j["device"]["name"], "NVIDIA H200");
  // No temp file left beside it.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) { (void)e; ++files; }
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

TEST(Report, MarkdownStartsWithTheVerdict) {
  const std::string md = report_to_markdown(three_paths());
  const size_t summary = md.find("## Summary");
  ASSERT_NE(summary, std::string::npos);
  const size_t verdict = md.find("The KV dtype cast takes 73.2% of the decode step");
  EXPECT_NE(verdict, std::string::npos) << md;
  EXPECT_NE(md.find("Fastest KV path: **fp8**"), std::string::npos);
  EXPECT_NE(md.find("| fp8 (winner) |"), std::string::npos);
  EXPECT_NE(md.find("Per-layer time per step"), std::string::npos);
  EXPECT_NE(md.find("Top kernels"), std::string::npos);
}

// The op table gets an "overlapped" column (and its note) only when some op ran on the engine's side stream behind
// busy work; report.json carries overlapped_us per op either way.
TEST(Report, OverlappedColumnOnlyWithSideStreamTime) {
  ReportInput in = three_paths();
  const std::string plain = report_to_markdown(in);
  EXPECT_EQ(plain.find("| overlapped |"), std::string::npos);
  EXPECT_EQ(plain.find("\noverlapped: "), std::string::npos);
  ASSERT_FALSE(in.runs[2].analysis.ops.empty());
  in.runs[2].analysis.ops[0].overlapped_us = 12.5;
  const std::string md = report_to_markdown(in);
  EXPECT_NE(md.find("| op | us / step | overlapped | share |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 12.5 |"), std::string::npos);
  EXPECT_NE(md.find("\noverlapped: us per step"), std::string::npos);
  EXPECT_EQ(to_json(in.runs[2].analysis)["ops"][0]["overlapped_us"], 12.5);
}

// Names from a foreign trace (kernels, runs) go into code spans whatever they hold: a backtick cannot close the
// span, a NUL or newline cannot break the table row, a '|' cannot split a cell.
TEST(Report, OddNamesStayInsideTheirCodeSpans) {
  ReportInput in = three_paths();
  in.runs[0].name = "run`x";
  ASSERT_FALSE(in.runs[0].analysis.top_kernels.empty());
  in.runs[0].analysis.top_kernels[0].name = std::string("ker`nel\0with|nul\nand ``two", 26);
  const std::string md = report_to_markdown(in);
  EXPECT_NE(md.find("## Run ``run`x``"), std::string::npos) << md;
  EXPECT_NE(md.find("| ```ker`nel with/nul and ``two``` |"), std::string::npos) << md;
  EXPECT_EQ(md.find('\0'), std::string::npos);
  // Free text from a trace (its messages) stays one list item and starts no Markdown construct.
  in.runs[0].analysis.trace_messages.push_back("bad\nline `x` <b> *y*");
  const std::string md2 = report_to_markdown(in);
  EXPECT_NE(md2.find("- bad line \\`x\\` \\<b\\> \\*y\\*\n"), std::string::npos) << md2;
  in.runs[0].name = "";
  EXPECT_NE(report_to_markdown(in).find("## Run (empty)"), std::string::npos);
}

TEST(Report, ManyLayersAreGroupedDenseAndMoe) {
  Timeline t;
  int64_t clock = 0;
  uint64_t id = 1;
  for (int layer = 0; layer < 20; ++layer) {
    test::add_op(t, &clock, id++, 0, layer, "attn.mla", 1, 1000 + layer, 0);
    test::add_op(t, &clock, id++, 0, layer, layer < 3 ? "mlp.dense" : "moe.experts", 1, 2000, 0);
  }
  ReportInput in;
  in.runs.push_back({"fp8", {}, analyze(t, Peaks{})});
  const std::string md = report_to_markdown(in);
  EXPECT_NE(md.find("dense layers 0-2 (mean of 3)"), std::string::npos) << md;
  EXPECT_NE(md.find("MoE layers 3-19 (mean of 17)"), std::string::npos) << md;
  EXPECT_NE(md.find("slowest: layer 19"), std::string::npos) << md;
}

TEST(AtomicWrite, BadFolderGivesOneClearErrorAndLeavesNoFile) {
  const fs::path dir = fs::temp_directory_path() / ("glm5_atomic_" + std::to_string(getpid()));
  fs::create_directories(dir);
  // A "folder" that is a regular file: fails for root too.
  const fs::path not_a_dir = dir / "file";
  std::ofstream(not_a_dir) << "x";
  try {
    write_report_json(three_paths(), (not_a_dir / "report.json").string());
    FAIL() << "expected glm5::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(not_a_dir.string()), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_THROW(write_file_atomic("/nonexistent_glm5/x/report.md", "x"), Error);
  EXPECT_THROW(require_writable_dir("/nonexistent_glm5"), Error);
  EXPECT_THROW(require_writable_dir(not_a_dir.string()), Error);
  // An unwritable folder (permissions do not apply to root: that part is skipped).
  const fs::path ro = dir / "ro";
  fs::create_directories(ro);
  chmod(ro.c_str(), 0555);
  if (access(ro.c_str(), W_OK) != 0) {
    EXPECT_THROW(write_report_md(three_paths(), (ro / "report.md").string()), Error);
    EXPECT_TRUE(fs::is_empty(ro));
  }
  chmod(ro.c_str(), 0755);
  // Nothing but the probe file itself was ever created.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) { (void)e; ++entries; }
  EXPECT_EQ(entries, 2);
  fs::remove_all(dir);
}

// A run's outputs are written together: a target that is a folder (or any failed write) leaves none of them,
// and no temp file; a clean commit writes them all, replacing older files.
TEST(AtomicOutputs, AllOrNone) {
  const fs::path dir = fs::path(testing::TempDir()) / ("glm5_atomic_outputs_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "report.md");  // the second target is a folder
  {
    AtomicOutputs out;
    out.stage((dir / "report.json").string(), "{}\n");
    try {
      out.stage((dir / "report.md").string(), "# r\n");
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("report.md': it is a folder"), std::string::npos) << e.what();
    }
  }  // not committed: the staged report.json's temp file goes
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"report.md"});
  fs::remove_all(dir / "report.md");
  std::ofstream(dir / "report.md") << "old";
  {
    AtomicOutputs out;
    out.stage((dir / "report.json").string(), "{\"a\": 1}\n");
    out.stage((dir / "report.md").string(), "new");
    out.commit();
  }
  std::ifstream md(dir / "report.md"), js(dir / "report.json");
  std::string m((std::istreambuf_iterator<char>(md)), {}), j((std::istreambuf_iterator<char>(js)), {});
  EXPECT_EQ(m, "new");
  EXPECT_EQ(j, "{\"a\": 1}\n");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) { (void)e; ++entries; }
  EXPECT_EQ(entries, 2);
  // The same target named twice is refused when staged (both would share one temp file).
  {
    AtomicOutputs out;
    out.stage((dir / "report.md").string(), "a");
    EXPECT_THROW(out.stage((dir / "." / "report.md").string(), "b"), Error);
  }
  // A rename that fails part way (the second target became a folder after staging) puts the first back.
  {
    AtomicOutputs out;
    out.stage((dir / "report.md").string(), "newer");
    out.stage((dir / "trace.json").string(), "t");
    fs::create_directories(dir / "trace.json" / "inside");
    EXPECT_THROW(out.commit(), Error);
  }
  std::ifstream md2(dir / "report.md");
  std::string m2((std::istreambuf_iterator<char>(md2)), {});
  EXPECT_EQ(m2, "new");  // the committed content of before, not "newer"
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"report.json", "report.md", "trace.json"}));  // no temp, no backup
  fs::remove_all(dir);
}

// A staged output has no name until commit() where the file system has O_TMPFILE, so a run killed while it writes
// leaves no temp file (bad-input attack, session 31: SIGTERM left a 23 MB report.json.tmp.<pid>). Checked on this
// machine's temp folder when it supports O_TMPFILE (tmpfs, ext4, xfs, btrfs do); skipped elsewhere.
TEST(AtomicOutputs, StagedFilesHaveNoNameUntilCommit) {
  const fs::path dir = fs::path(testing::TempDir()) / ("glm5_atomic_unnamed_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int probe = ::open(dir.c_str(), O_TMPFILE | O_WRONLY, 0600);
  if (probe < 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "no O_TMPFILE on " << dir << ": staged files are named <target>.tmp.<pid> there";
  }
  ::close(probe);
  auto entries = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  {
    AtomicOutputs out;
    out.stage((dir / "report.json").string(), std::string(1 << 20, 'x'));
    out.stage((dir / "report.md").string(), "# r\n");
    EXPECT_EQ(entries(), std::vector<std::string>{}) << "a staged file has a name before commit";
    out.commit();
  }
  EXPECT_EQ(entries(), (std::vector<std::string>{"report.json", "report.md"}));
  EXPECT_EQ(fs::file_size(dir / "report.json"), size_t(1) << 20);
  {
    AtomicOutputs out;  // staged, never committed: nothing of it stays, the committed files are untouched
    out.stage((dir / "report.json").string(), "new");
  }
  EXPECT_EQ(entries(), (std::vector<std::string>{"report.json", "report.md"}));
  EXPECT_EQ(fs::file_size(dir / "report.json"), size_t(1) << 20);
  fs::remove_all(dir);
}

// A symbolic link is written through (the link stays, its target gets the content); a FIFO (like a device) is
// refused with one line and left as it was: the rename would replace it by a regular file (session 18: --md
// /dev/null, run as root, replaced /dev/null), and opening it to write would block without a reader.
TEST(AtomicOutputs, SymlinksAreFollowedAndSpecialFilesRefused) {
  const fs::path dir = fs::path(testing::TempDir()) / ("glm5_atomic_special_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "real");
  std::ofstream(dir / "real" / "report.md") << "old";
  fs::create_symlink(dir / "real" / "report.md", dir / "link.md");
  fs::create_symlink(dir / "real" / "new.md", dir / "dangling.md");  // the target does not exist yet
  write_file_atomic((dir / "link.md").string(), "new");
  write_file_atomic((dir / "dangling.md").string(), "made");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "link.md")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "dangling.md")));
  std::ifstream a(dir / "real" / "report.md"), b(dir / "real" / "new.md");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(a)), {}), "new");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(b)), {}), "made");
  // A FIFO, directly and through a link.
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0644), 0);
  fs::create_symlink(dir / "fifo", dir / "fifo_link");
  for (const char* name : {"fifo", "fifo_link"}) {
    try {
      write_file_atomic((dir / name).string(), "x");
      FAIL() << "expected an error for " << name;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(name), std::string::npos) << m;
      EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  EXPECT_TRUE(fs::is_fifo(fs::status(dir / "fifo")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "fifo_link")));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"dangling.md", "fifo", "fifo_link", "link.md", "real"}));  // no temp file
  fs::remove_all(dir);
}

}  // namespace
}  // namespace glm5
