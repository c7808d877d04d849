// glm5prof command line (CLI11). Every error becomes one line on stderr and a non-zero exit:
// 1 for a failed run (bad input file, model does not fit, CUDA error), 2 for bad usage, 3 for a
// `profile` whose trace is incomplete (outputs written, saying so).
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/json_excerpt.h"
#include "cli/bench.h"
#include "cli/cli_checks.h"
#include "cli/compare_cli.h"
#include "cli/diff_cli.h"
#include "common/buffer.h"
#include "common/error.h"
#include "common/input_file.h"
#include "engine/greedy_decode.h"
#include "engine/profile_session.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "profiler/cupti_tracer.h"
#include "report/report.h"
#include "trace/atomic_file.h"
#include "trace/chrome_trace.h"

using namespace glm5;

namespace {

// Token ids from "1,2,3" / "[1, 2, 3]" (inline, when no such file exists) or from a file holding a JSON
// list. Every error is one line naming the argument (or file) and what was wrong.
std::vector<int32_t> parse_id_list(const std::string& text, const std::string& what, bool inline_arg) {
  nlohmann::json j;
  try {
    std::string t = text;
    // Inline only: "1,2,3" is shorthand for [1, 2, 3]. A file must hold the JSON list itself (a file holding `5` or
    // `1,2,3` is refused, as the README says).
    if (inline_arg && t.find_first_of("[{\"") == std::string::npos) t = "[" + t + "]";
    j = nlohmann::json::parse(t);
  } catch (const nlohmann::json::exception&) {
    throw Error("--prompt-ids: " + what + (inline_arg ? " is neither a list of token ids like 1,2,3 nor an existing file"
                                                      : " is not valid JSON (expected a list of token ids)"));
  }
  if (!j.is_array()) throw Error("--prompt-ids: " + what + ": expected a JSON list of token ids, got a JSON " +
                                 std::string(j.type_name()));
  std::vector<int32_t> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& v = j[i];
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)
      throw Error("--prompt-ids: " + what + ": token id " + json_excerpt(v, 30) + " is negative");
    if (!v.is_number_integer() || v.get<uint64_t>() >= (1ull << 31))
      throw Error("--prompt-ids: " + what + ": token id [" + std::to_string(i) + "] must be an integer in [0, 2^31), got " +
                  json_excerpt(v, 30));
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  if (ids.empty()) throw Error("--prompt-ids: " + what + ": the prompt is empty");
  return ids;
}

bool names_a_file(const std::string& arg) {
  std::error_code ec;
  return std::filesystem::exists(arg, ec);
}

// Token ids `name` of a --reference file: stored as I32 or I64 (a float tensor read as ids would truncate silently)
// and each in [0, vocab), read as integers (an I64 id past 2^31 is refused, not wrapped).
std::vector<int32_t> reference_ids(const SafetensorsFile& ref, const char* name, const std::string& path, int vocab) {
  const SafetensorsView& v = ref.get(name);
  const std::string where = "--reference '" + path + "': " + name;
  require(v.dtype == DType::I32 || v.dtype == DType::I64,
          where + " has dtype " + dtype_name(v.dtype) + ", expected I32 or I64 token ids");
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t id = 0;
    if (v.dtype == DType::I32) {
      int32_t x;
      std::memcpy(&x, v.data + 4 * i, 4);
      id = x;
    } else {
      std::memcpy(&id, v.data + 8 * i, 8);
    }
    require(id >= 0 && id < vocab, where + "[" + std::to_string(i) + "] = " + std::to_string(id) +
                                       ", expected a token id in [0, " + std::to_string(vocab) + ")");
    ids.push_back(int32_t(id));
  }
  return ids;
}

std::vector<int32_t> parse_ids(const std::string& arg) {
  if (!names_a_file(arg)) return parse_id_list(arg, "'" + arg + "'", true);
  require_regular_file(arg, "--prompt-ids: a JSON list file");
  std::ifstream f(arg);
  require(bool(f), "--prompt-ids: cannot read '" + arg + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_id_list(ss.str(), "file '" + arg + "'", false);
}

int run_decode(const std::string& weights_dir, const std::string& model, const std::string& prompt_arg, int new_tokens,
               const std::string& backend, const std::string& kv_dtype, const std::string& kv_path,
               const std::string& reference, const std::string& weights_dtype) {
  require(kv_dtype == "bf16" || kv_dtype == "fp8", "--kv-dtype must be bf16 or fp8, got '" + kv_dtype + "'");
  require(!(weights_dir == "synthetic" && model.empty()),
          "--weights synthetic needs --model (glm5, glm5-tiny, deepseek-v3 or a config.json)");
  if (weights_dir != "synthetic") require_checkpoint_folder(weights_dir);
  // The reference is opened before any work so a wrong file fails at once.
  SafetensorsFile ref;
  std::vector<int32_t> forced;  // the reference's generated ids, teacher-forced below
  if (!reference.empty()) {
    require_regular_file(reference, "--reference: an expected.safetensors file");
    ref.open(reference);
  }
  const bool cuda = resolve_backend(backend) == Backend::Cuda;
  ModelConfig cfg = resolve_model_config(model.empty() ? weights_dir : model);
  std::vector<int32_t> prompt = parse_ids(prompt_arg);
  if (!reference.empty()) {
    // The teacher-forced comparison is meaningful only for the prompt the reference was made from.
    const std::vector<int32_t> ref_prompt = reference_ids(ref, "prompt_ids", reference, cfg.vocab_size);
    forced = reference_ids(ref, "generated_ids", reference, cfg.vocab_size);  // checked before any work
    require(ref_prompt == prompt, "--reference '" + reference + "': its prompt_ids (" +
                                      std::to_string(ref_prompt.size()) + " tokens) differ from --prompt-ids (" +
                                      std::to_string(prompt.size()) + " tokens)");
    const SafetensorsView& lg = ref.get("logits");
    std::string shape;
    for (int64_t d : lg.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    require(lg.shape.size() == 2 && lg.shape[1] == cfg.vocab_size && lg.shape[0] >= 1,
            "--reference '" + reference + "': logits must be [steps >= 1, vocab_size = " +
                std::to_string(cfg.vocab_size) + "], got [" + shape + "]");
    require(int64_t(forced.size()) >= lg.shape[0],
            "--reference '" + reference + "': generated_ids has fewer entries than logits has rows");
    // A NaN or inf in the expected logits would print rel_error nan and a meaningless ref_top1 with exit 0.
    for (int64_t i = 0; i < lg.numel(); ++i) {
      const float x = read_element_as_float(lg.dtype, lg.data, i);
      require(std::isfinite(x), "--reference '" + reference + "': logits[" + std::to_string(i / lg.shape[1]) + ", " +
                                    std::to_string(i % lg.shape[1]) + "] is not finite (" + std::to_string(x) +
                                    "), expected finite logits");
    }
  }
  require(new_tokens >= 1 && int64_t(prompt.size()) + new_tokens <= cfg.max_position_embeddings,
          "--new-tokens " + std::to_string(new_tokens) + " with a " + std::to_string(prompt.size()) +
              "-token prompt must stay within max_position_embeddings = " + std::to_string(cfg.max_position_embeddings));
  for (size_t i = 0; i < prompt.size(); ++i)
    require(prompt[i] < cfg.vocab_size, "--prompt-ids '" + prompt_arg + "': token id [" + std::to_string(i) + "] = " +
                                            std::to_string(prompt[i]) + " is outside the vocabulary of " +
                                            std::to_string(cfg.vocab_size) + " (expected ids in [0, " +
                                            std::to_string(cfg.vocab_size) + "))");
  KvPath path = kv_dtype == "bf16" ? KvPath::Bf16 : parse_kv_path(kv_path);
  WeightOptions wo;
  wo.where = cuda ? Where::Device : Where::Host;
  wo.matrix_dtype = cuda ? DType::BF16 : DType::F32;
  wo.fp8_linear = weights_dtype == "fp8";
  // Refused before anything is allocated, as profile does (the CPU backend's limit is profile's, 24 GiB):
  // full GLM-5 on the CPU would otherwise grow until the machine runs out of memory.
  size_t free_b = 0;
  const size_t budget = memory_budget_bytes(cuda, &free_b);
  const size_t weight_bytes = estimate_weight_bytes(cfg, wo);
  require(weight_bytes <= budget,
          "model does not fit: its weights need " + std::to_string(weight_bytes) + " bytes, above the budget of " +
              std::to_string(budget) + " bytes (95% of the " + std::to_string(free_b) + " bytes free" +
              (cuda ? " on the GPU)" : ", the CPU backend limit)") +
              "; decode a smaller model (e.g. --model glm5-tiny)");
  Weights w = weights_dir == "synthetic" ? synthetic_weights(cfg, 1234, wo) : load_weights(cfg, weights_dir, wo);
  Backend be = cuda ? Backend::Cuda : Backend::Cpu;
  GreedyDecodeResult r = greedy_decode(cfg, w, be, path, prompt, new_tokens);
  std::printf("generated");
  for (int32_t t : r.generated) std::printf(" %d", t);
  std::printf("\nlogits_hash 0x%016llx\n", (unsigned long long)r.logits_hash);
  if (!reference.empty()) {
    // Teacher forcing against a reference: feed its tokens, compare its logits step by step.
    const SafetensorsView& lg = ref.get("logits");
    int n = std::min<int>(int(lg.shape[0]), new_tokens);
    GreedyDecodeResult tf = greedy_decode(cfg, w, be, path, prompt, n, forced);
    std::printf("teacher-forced against %s (%s KV, %s):\nstep  rel_error  top1  ref_top1  ref_margin\n", reference.c_str(),
                kv_dtype.c_str(), kv_path_name(path).c_str());
    int vocab = int(lg.shape[1]);
    for (int k = 0; k < n; ++k) {
      std::vector<float> row(vocab);
      for (int j = 0; j < vocab; ++j) row[j] = read_element_as_float(lg.dtype, lg.data, int64_t(k) * vocab + j);
      std::printf("%4d  %9.3g  %4d  %8d  %10.4f\n", k, relative_error(tf.logits[k], row), argmax_index(tf.logits[k]),
                  argmax_index(row), top1_margin(row));
    }
  }
  return 0;
}

int run_analyze(const std::string& trace, const std::string& out_dir) {
  check_output_dir(out_dir);
  require_outputs_not_inputs({out_dir + "/report.json", out_dir + "/report.md"}, {trace}, "--out folder");
  Timeline t = read_chrome_trace(trace);
  // A glm5prof trace carries the ceilings its profile used (glm5prof.peaks); unknown for a foreign trace: the
  // percentages and roofline hotspots are then left out.
  const Peaks peaks{t.copy_gbps, t.bf16_tflops};
  ReportInput in = report_of_trace(t, trace, peaks);
  in.run_spec = nlohmann::json{{"command", "analyze"}, {"trace", trace}};
  create_output_dir(out_dir);
  AtomicOutputs files;  // both or neither
  write_report_json(in, out_dir + "/report.json", &files);
  write_report_md(in, out_dir + "/report.md", &files);
  files.commit();
  std::printf("%s", report_to_markdown(in).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // NVTX markers reach CUPTI only if the injection library is set before the first NVTX call.
  arrange_nvtx_injection();
  CLI::App app{"glm5prof: where GLM-5 decode time goes, layer by layer and kernel by kernel, and what the FP8 KV "
               "cache's dtype cast costs"};
  app.require_subcommand(0, 1);

  ProfileOptions po;
  std::string kv_path = "all", kv_dtype = "fp8";
  CLI::App* prof = app.add_subcommand("profile", "profile decode steps over the KV paths (the default command)");
  prof->add_option("--model", po.model, "glm5 | glm5-tiny | deepseek-v3 | PATH/config.json (default: glm5 on a GPU, glm5-tiny on CPU)")
      ->check(non_empty());
  prof->add_option("--weights", po.weights, "synthetic | checkpoint folder")->capture_default_str();
  prof->add_option("--weights-dtype", po.weights_dtype,
                   "bf16 | fp8: fp8 stores the projections and experts as e4m3 with 128x128 block scales (GLM-5-FP8 layout)")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp8"}));
  prof->add_option("--backend", po.backend, "auto | cuda | cpu")->capture_default_str()->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  prof->add_option("--kv-path", kv_path, "cast | gather-cast | fp8 | all")->capture_default_str()->check(CLI::IsMember({"cast", "gather-cast", "fp8", "all"}));
  prof->add_option("--kv-dtype", kv_dtype, "fp8 | bf16")->capture_default_str()->check(CLI::IsMember({"fp8", "bf16"}));
  prof->add_option("--batch", po.batch, "requests per step")->capture_default_str()->check(CLI::Range(1, 4096));
  prof->add_option("--context", po.context, "tokens already cached per request (default 32768 on GPU, 256 on CPU)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  prof->add_option("--pool-tokens", po.pool_tokens, "KV pool capacity per layer in tokens, rounded up to whole 64-token pages (default 495000 on GPU, 4096 on CPU)")
      ->check(CLI::Range(int64_t(1), std::numeric_limits<int64_t>::max()));
  prof->add_option("--steps", po.steps, "measured decode steps")->capture_default_str()->check(CLI::Range(1, 1000));
  prof->add_option("--warmup", po.warmup, "untraced steps first")->capture_default_str()->check(CLI::Range(0, 1000));
  prof->add_option("--untraced-steps", po.untraced_steps,
                   "steps timed with CUDA events only (no CUPTI) before tracing: the report states the tracing overhead")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  prof->add_flag("--graph", po.graph, "capture each decode step into a CUDA graph once and replay it (CUDA backend)");
  prof->add_option("--graph-trace", po.graph_trace,
                   "with --graph: graph | node (default graph). graph: the measured steps get one CUPTI record per "
                   "graph launch (no per-kernel cost), then --attribution-steps steps are traced per kernel node for "
                   "the per-op analysis; node: every measured step traced per kernel node (~1 us per node)")
      ->check(CLI::IsMember({"graph", "node"}));
  prof->add_option("--attribution-steps", po.attribution_steps,
                   "with --graph-trace graph: node-level steps after the measured ones for the per-op analysis (default 1)")
      ->check(CLI::Range(1, 100));
  prof->add_option("--fp8-gemv", po.fp8_gemv,
                   "regs | tma: how the batch-1 FP8 GEMV streams its weights (default regs; tma: TMA boxes into a "
                   "shared-memory ring, kernels/linear_fp8_tma.h)")
      ->capture_default_str()
      ->check(CLI::IsMember({"regs", "tma"}));
  prof->add_option("--gemv-l2-lookahead", po.gemv_l2_lookahead,
                   "0..8: every FP8 GEMV's warps ask L2 for their weights this many 1024-column steps ahead of their "
                   "loads (tuning; 0 off; the same results)")
      ->capture_default_str()
      ->check(CLI::Range(0, 8));
  prof->add_option("--overlap", po.overlap,
                   "on | off: run the ops off the critical chain (the indexer's head weights, the query absorption) on "
                   "a side stream, overlapping the main chain (CUDA; off: one stream, every op in order)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  // CLI::Range prints its bounds as 0.000000 and 1.000000; this names the expectation plainly.
  const CLI::Validator fraction(
      [](std::string& v) -> std::string {
        double x = -1;
        return CLI::detail::lexical_cast(v, x) && x >= 0 && x <= 1 ? std::string()
                                                                    : "'" + v + "' is not a fraction in [0, 1]";
      },
      "FRACTION");
  prof->add_option("--l2-prefetch-o-proj", po.o_proj_l2_prefetch,
                   "fraction of attn.o_proj's weights asked into L2 on the side stream while the indexer and attn.mla "
                   "run (needs --overlap on; 0: off)")
      ->capture_default_str()
      ->check(fraction);
  prof->add_option("--l2-prefetch-q-up", po.q_up_l2_prefetch,
                   "fraction of attn.q_up_proj's weights asked into L2 on the side stream while attn.qkv_a_proj and the "
                   "q_a RMSNorm run (needs --overlap on; 0: off)")
      ->capture_default_str()
      ->check(fraction);
  prof->add_option("--l2-prefetch-period", po.l2_prefetch_period,
                   "bytes per period of the L2 prefetch pattern: the first fraction of every period of a row is asked "
                   "for (tuning; 0: 4096)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            long long x = -1;
            return CLI::detail::lexical_cast(v, x) && x >= 0 && x <= (1 << 20) && x % 16 == 0
                       ? std::string()
                       : "'" + v + "' is not a multiple of 16 in [0, 1048576]";
          },
          "BYTES"));
  prof->add_option("--l2-prefetch-evict-last", po.l2_prefetch_evict_last,
                   "on | off: L2 prefetches insert their lines with the evict_last priority (tuning)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--l2-persist-mib", po.l2_persist_mib,
                   "MiB of L2 set aside for persisting (evict_last) lines while the engine runs (device-wide; clipped to "
                   "the device's maximum; 0: unchanged). Tuning")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  prof->add_option("--l2-prefetch-join", po.l2_prefetch_join,
                   "on | off: attn.o_proj waits for its L2 prefetch kernel (and loses its PDL launch). Tuning")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--fp8-mma-max-m", po.fp8_mma_max_m,
                   "largest batch on the FP8 tensor-core linear (kernels/linear_fp8.h; 0: off); above it --fp8-large-m")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  prof->add_option("--fp8-large-m", po.fp8_large_m,
                   "wgmma | dequant | block-scaled: FP8 projections above the tensor-core range: our FP8 tensor-core "
                   "GEMM (x quantized per token and 128 columns, e4m3 x e4m3 wgmma; H100 / H200), W dequantized to "
                   "BF16 + cuBLASLt, or cuBLASLt's block-scaled FP8 GEMM (the same quantization of x)")
      ->capture_default_str()
      ->check(CLI::IsMember({"wgmma", "dequant", "block-scaled"}));
  prof->add_option("--fp8-wgmma-cut", po.fp8_wgmma_cut,
                   "stream-k | split-k: how --fp8-large-m wgmma cuts its work over the SMs (stream-k: every SM the "
                   "same number of weight blocks, for token tiles of 64 / 128 where the plan's cost model favours it; "
                   "split-k: always whole splits per 128-row block). Tuning")
      ->capture_default_str()
      ->check(CLI::IsMember({"stream-k", "split-k"}));
  prof->add_option("--mma-pdl", po.mma_pdl,
                   "on | off: the FP8 tensor-core linear (batch 2..64) launched with programmatic dependent launch. Tuning")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--o-proj-pdl", po.o_proj_pdl,
                   "on | off: attn.o_proj alone launched with programmatic dependent launch on the FP8 tensor-core "
                   "path (batch 2..64). Tuning")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--absorb-tc", po.absorb_tc,
                   "on | off: attn.q_absorb / attn.v_unabsorb on the split-BF16 tensor-core kernels from batch 5 "
                   "(off: the fp32-FMA kernels). Tuning")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--moe-combine-norm", po.moe_combine_norm,
                   "on | off: below batch 4 with FP8 experts, the MoE combine also computes the next layer's input "
                   "RMSNorm (op attn.norm then has no launch of its own). Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--side-priority", po.side_priority,
                   "on | off: the side stream (--overlap on) at the device's highest stream priority, so its small "
                   "kernels are scheduled ahead of a main-stream kernel's pending CTAs. Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--gemv-fold", po.gemv_fold,
                   "on | off: at batch 1 (the FP8 GEMV), attn.norm and attn.q_a_norm folded into the projections that "
                   "read them and attn.rope into attn.q_up_proj (three launches fewer per layer on the main chain). "
                   "Tuning; equal up to fp32 rounding order")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--moe-wgmma", po.moe_wgmma,
                   "on | off: FP8 or BF16 routed experts at batch >= 4 on the tensor cores fed by TMA (persistent CTAs; "
                   "x and act quantized to e4m3 per 128 columns, or rounded to bf16 as profile's BF16 projections; on) or the "
                   "mma.sync grouped kernels")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--moe-fused", po.moe_fused,
                   "on | off: the batch < 4 FP8 MoE gate/up and down projections of the routed experts as one "
                   "persistent launch. Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--moe-down-early", po.moe_down_early,
                   "on | off: the batch < 4 FP8 MoE down kernel issues its first weight loads before waiting for the "
                   "gate/up kernel (PDL). Tuning")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--moe-shared-late", po.moe_shared_late,
                   "on | off: at batch < 4 with FP8 experts, the shared expert's down kernel (side stream) is admitted "
                   "to the SMs only when its gate/up kernel's blocks exit, leaving slots for the routed experts. "
                   "Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--moe-gate-fused", po.moe_gate_fused,
                   "on | off: at batch <= 4 (MoE layers, BF16 router), mlp.norm, moe.router and moe.route as one "
                   "launch (op moe.router). Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--qkv-a-admit-at-exit", po.qkv_a_admit_at_exit,
                   "on | off: at batch 1 with the GEMV fold, attn.q_up_proj's blocks are scheduled only when "
                   "attn.qkv_a_proj's exit (the side stream's KV prologue goes first). Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--score-early-keys", po.score_early_keys,
                   "on | off: the DSA indexer's score kernel issues its first key loads before waiting for the "
                   "previous kernel (the new token's key loaded again after). Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--moe-route-rank", po.moe_route_rank,
                   "on | off: moe.route ranks every expert at once (one block per token) instead of one warp picking "
                   "the k experts in turn. Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--prologue-slim", po.prologue_slim,
                   "on | off: attn.prologue's kernel limited to 32 registers per thread so its blocks fit beside the "
                   "batch-1 GEMV's and start at once. Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--absorb-after-score", po.absorb_after_score,
                   "on | off: attn.q_absorb (side stream) starts after the DSA indexer's score kernel, beside its "
                   "top-k, instead of after attn.q_up_proj (on: the default). Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--unabsorb-l2-prefetch", po.unabsorb_l2_prefetch,
                   "on | loads | off: where attn.mla's split-K combine runs (small batch), its blocks ask L2 for "
                   "attn.v_unabsorb's weights before waiting for attn.mla (on: L2 prefetch requests; loads: plain "
                   "loads). Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "loads", "off"}));
  prof->add_option("--mla-fp8-operands", po.mla_fp8_operands,
                   "f16 | bf16: operands of the `fp8` path's wgmma MLA kernel (batches that fill the GPU). f16: the "
                   "codes dequantized to fp16 (faster, nearer exact); bf16: the cast paths' bf16 values, so the three "
                   "KV paths give identical bits")
      ->capture_default_str()
      ->check(CLI::IsMember({"f16", "bf16"}));
  prof->add_option("--topk-cluster", po.topk_cluster,
                   "0 | 1 | 2 | 4 | 8: GPU blocks (one thread-block cluster) per request in the DSA indexer's "
                   "top-k; 0 = chosen by batch and context. Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::Range(0, 8))  // (IsMember alone let an empty value through as the default)
      ->check(CLI::IsMember({0, 1, 2, 4, 8}));
  prof->add_option("--topk-gather", po.topk_gather,
                   "on | off: after the first radix pass of the DSA indexer's top-k, one block of the request's "
                   "cluster resolves the k-th score alone (on) or every block runs two more cluster passes (off). "
                   "Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--topk-score-hist", po.topk_score_hist,
                   "on | off: the DSA indexer's score kernel also builds the histogram of its scores' first radix "
                   "digits, which the top-k reads instead of building its own. Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--topk-flat", po.topk_flat,
                   "on | off: where the score kernel builds that histogram, the DSA indexer's top-k runs as a grid of "
                   "small blocks per request whose last block resolves the k-th score (on) instead of one thread-block "
                   "cluster of whole SMs (off). Tuning; the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--indexer-first", po.indexer_first,
                   "on | off: the DSA indexer's query projection runs as its own GEMV, followed by the score and the "
                   "top-k, with attn.q_b_proj and the absorption forked on the side stream (where the batch-1 GEMV "
                   "folds the q_a norm and RoPE). Tuning (measured slower); the same results")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  prof->add_option("--seed", po.seed, "synthetic weights, KV and tokens")->capture_default_str()
      ->check(kNonNegativeInteger);
  prof->add_option("--share-mlp", po.share_mlp, "auto | on | off: one expert/MLP weight set for all layers")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  prof->add_option("--out", po.out_dir, "output folder (trace.json, report.json, report.md)")->capture_default_str()->check(non_empty());
  prof->add_option("--tp", po.tp, "tensor/expert-parallel ranks: alone, N GPUs of this host (NCCL); with --rank, one rank's shard on one GPU")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  prof->add_option("--rank", po.rank, "profile only this rank's shard (collectives marked, not performed)")->check(CLI::Range(0, 63));
  prof->add_option("--nccl-id-file", po.nccl_id_file,
                   "one process per rank (several hosts): with --tp N --rank R, real NCCL collectives; rank 0 writes "
                   "the NCCL unique id to this shared file, the others wait for it");
  prof->parse_complete_callback([prof, &kv_path, &kv_dtype, &po] {
    if (kv_dtype == "bf16" && prof->count("--kv-path") && kv_path != "all")
      throw CLI::ValidationError("--kv-path " + kv_path + " contradicts --kv-dtype bf16 (a BF16 KV pool has nothing "
                                 "to cast: leave --kv-path out or use --kv-dtype fp8)");
    if (prof->count("--graph-trace") && !po.graph)
      throw CLI::ValidationError("--graph-trace " + po.graph_trace +
                                 " applies to CUDA graph replays only: add --graph or drop it");
    if (prof->count("--attribution-steps") && (!po.graph || po.graph_trace == "node"))
      throw CLI::ValidationError("--attribution-steps applies to --graph with --graph-trace graph only (node level "
                                 "attributes every measured step)");
    const bool prefetching = po.o_proj_l2_prefetch > 0 || po.q_up_l2_prefetch > 0;
    if (prefetching && po.overlap == "off")
      throw CLI::ValidationError("--l2-prefetch-o-proj / --l2-prefetch-q-up run on the side stream: drop --overlap off");
    if (!prefetching && (prof->count("--l2-prefetch-period") || prof->count("--l2-prefetch-evict-last") ||
                         prof->count("--l2-persist-mib")))
      throw CLI::ValidationError("--l2-prefetch-period / --l2-prefetch-evict-last / --l2-persist-mib shape an L2 "
                                 "prefetch: add --l2-prefetch-o-proj F or --l2-prefetch-q-up F");
    if (po.l2_prefetch_join == "on" && po.o_proj_l2_prefetch <= 0)
      throw CLI::ValidationError("--l2-prefetch-join on joins the o_proj prefetch: add --l2-prefetch-o-proj F");
  });

  std::string weights_dir, model, prompt, backend = "auto", dkv_dtype = "bf16", dkv_path = "fp8", reference;
  std::string dweights_dtype = "bf16";
  int new_tokens = 8;
  CLI::App* dec = app.add_subcommand("decode", "greedy decode of a prompt: prints the tokens and a logits hash");
  dec->add_option("--weights", weights_dir, "checkpoint folder (or 'synthetic' with --model)")->required();
  dec->add_option("--model", model, "config (default: the checkpoint's config.json)")->check(non_empty());
  dec->add_option("--prompt-ids", prompt, "token ids: 1,2,3 or a JSON list file")
      ->required()
      ->check(CLI::Validator(
          [](std::string& arg) -> std::string {  // an inline list is usage (exit 2); a file is read later (exit 1)
            if (names_a_file(arg)) return "";
            try {
              parse_ids(arg);
            } catch (const Error& e) {
              const std::string m = e.what(), prefix = "--prompt-ids: ";
              return m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;
            }
            return "";
          },
          "IDS", "token id list"));
  dec->add_option("--new-tokens", new_tokens, "tokens to generate")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  dec->add_option("--backend", backend, "auto | cuda | cpu")->capture_default_str()->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  dec->add_option("--kv-dtype", dkv_dtype, "bf16 | fp8")->capture_default_str()->check(CLI::IsMember({"bf16", "fp8"}));
  dec->add_option("--kv-path", dkv_path, "with fp8: cast | gather-cast | fp8")
      ->capture_default_str()
      ->check(CLI::IsMember({"cast", "gather-cast", "fp8"}));
  dec->add_option("--reference", reference, "expected.safetensors: teacher-forced logits comparison");
  dec->add_option("--weights-dtype", dweights_dtype, "bf16 | fp8: keep (or quantize to) FP8 block-scaled projections and experts")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp8"}));
  dec->parse_complete_callback([dec, &dkv_path, &dkv_dtype, &weights_dir, &model] {
    if (dkv_dtype == "bf16" && dec->count("--kv-path"))
      throw CLI::ValidationError("--kv-path " + dkv_path + " contradicts --kv-dtype bf16 (decode's default: a BF16 KV "
                                 "pool has nothing to cast; add --kv-dtype fp8)");
    if (weights_dir == "synthetic" && model.empty())
      throw CLI::ValidationError("--weights synthetic needs --model (glm5, glm5-tiny, deepseek-v3 or a config.json)");
  });

  std::string trace, aout = "glm5prof-analysis";
  CLI::App* ana = app.add_subcommand("analyze", "hotspots of an existing torch.profiler / Kineto / glm5prof trace");
  ana->add_option("trace", trace, "trace .json")->required();
  ana->add_option("--out", aout, "output folder")->capture_default_str()->check(non_empty());

  BenchCli bench = add_bench_subcommand(app);  // glm5prof bench kernels (cli/bench.cpp)
  DiffCliArgs diff_args;
  CLI::App* dif = add_diff_subcommand(app, diff_args);  // glm5prof diff BASE NEW (cli/diff_cli.cpp)
  CompareOptions compare_opt;
  CLI::App* cmp = add_compare_subcommand(app, compare_opt);  // glm5prof compare (cli/compare_cli.cpp)

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // `bench foo`: CLI11 only says a subcommand is required; name the word it did not know.
    if (bench.bench->parsed() && !bench.kernels->parsed() && !bench.bench->remaining().empty()) {
      const std::string word = bench.bench->remaining().front();
      if (word.rfind("-", 0) == 0)  // `bench --quick`: an option of a benchmark, given before its name
        std::fprintf(stderr, "glm5prof: bench: %s comes after the benchmark's name (glm5prof bench kernels %s; see "
                             "glm5prof bench kernels --help)\n", word.c_str(), word.c_str());
      else
        std::fprintf(stderr, "glm5prof: bench: unknown benchmark '%s' (expected: kernels; see glm5prof bench --help)\n",
                     word.c_str());
      return 2;
    }
    std::fprintf(stderr, "glm5prof: %s (see glm5prof --help)\n", e.what());
    return 2;
  }
  try {
    if (*dec) return run_decode(weights_dir, model, prompt, new_tokens, backend, dkv_dtype, dkv_path, reference, dweights_dtype);
    if (*ana) return run_analyze(trace, aout);
    if (bench.selected()) return bench.run();
    if (*dif) return run_diff_cli(diff_args);
    if (*cmp) return run_compare_cli(compare_opt);
    // profile (also with no subcommand: the embedded default)
    require(kv_dtype == "fp8" || kv_dtype == "bf16", "--kv-dtype must be fp8 or bf16, got '" + kv_dtype + "'");
    if (prof->count("--context")) require(po.context >= 0, "--context must be >= 0, got " + std::to_string(po.context));
    if (prof->count("--pool-tokens"))
      require(po.pool_tokens >= 1, "--pool-tokens must be positive, got " + std::to_string(po.pool_tokens));
    po.kv_fp8 = kv_dtype == "fp8";
    if (kv_path != "all") po.paths = {parse_kv_path(kv_path)};
    ReportInput result;
    std::printf("%s", run_profile(po, &result).c_str());
    if (!report_complete(result)) {
      // The outputs are written and say so; the exit status makes a script notice.
      for (const std::string& l : incomplete_trace_lines(result))
        std::fprintf(stderr, "glm5prof: incomplete trace: %s\n", l.c_str());
      return 3;
    }
    return 0;
  } catch (const UsageError& e) {  // an option out of range or contradicting another: bad usage (README)
    std::fprintf(stderr, "glm5prof: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "glm5prof: error: %s\n", e.what());
    return 1;
  }
}
