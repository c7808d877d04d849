#include "analysis/analysis.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include "analysis/hotspots.h"

namespace glm5 {

const std::vector<std::string>& canonical_op_order() {
  // The engine's ops (src/engine/decode_engine.cpp) in execution order, plus common aliases.
  static const std::vector<std::string> order = {
      "embed",
      "attn.norm", "attn.q_up_proj.l2_prefetch", "attn.qkv_a_proj", "attn.q_a_proj", "attn.q_a_norm", "attn.q_up_proj", "attn.q_b_proj", "attn.q_proj",
      "attn.kv_a_proj",
      "attn.indexer.wk", "attn.indexer.weights_proj", "attn.prologue", "attn.kv_a_norm", "attn.rope", "attn.kv_write",
      "attn.kv_append", "attn.indexer", "attn.indexer.wq_b", "attn.indexer.k_write", "attn.indexer.score",
      "attn.indexer.topk", "attn.topk",
      "attn.q_absorb", "attn.o_proj.l2_prefetch", "attn.kv_cast", "attn.kv_gather_cast", "attn.mla", "attn.v_unabsorb",
      "attn.v_absorb", "attn.o_proj",
      "mlp.norm", "mlp.gate_up", "mlp.act", "mlp.down", "mlp.dense",
      "moe.norm", "moe.router", "moe.route", "moe.experts",
      "moe.shared.gate_up", "moe.shared.act", "moe.shared.down", "moe.shared", "moe.combine",
      "moe.residual", "allreduce",
      "final_norm", "lm_head", "sample"};
  return order;
}

namespace {

// Rank for sorting op names: canonical ones first in their order, the others after, by name.
std::pair<size_t, std::string> op_rank(const std::string& op) {
  const auto& order = canonical_op_order();
  auto it = std::find(order.begin(), order.end(), op);
  return {static_cast<size_t>(it - order.begin()), it == order.end() ? op : std::string()};
}

bool is_device_work(const Activity& a) {
  return a.kind == ActivityKind::kernel || a.kind == ActivityKind::memcpy ||
         a.kind == ActivityKind::memset;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr double kNsPerUs = 1e3;

// The union of intervals [first, second) as sorted, disjoint intervals.
std::vector<std::pair<int64_t, int64_t>> merge_spans(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<int64_t, int64_t>> m;
  for (const auto& x : v) {
    if (!m.empty() && x.first <= m.back().second) m.back().second = std::max(m.back().second, x.second);
    else m.push_back(x);
  }
  return m;
}

}  // namespace

std::vector<int64_t> exclusive_durations_ns(const std::vector<const Activity*>& work) {
  std::vector<size_t> order(work.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Activity &x = *work[a], &y = *work[b];
    return std::tie(x.device, x.stream, x.start_ns, x.end_ns) < std::tie(y.device, y.stream, y.start_ns, y.end_ns);
  });
  std::vector<int64_t> ns(work.size(), 0);
  int64_t covered = 0;  // latest end so far on the current (device, stream)
  for (size_t j = 0; j < order.size(); ++j) {
    const Activity& a = *work[order[j]];
    const bool same = j > 0 && work[order[j - 1]]->device == a.device && work[order[j - 1]]->stream == a.stream;
    if (!same || a.stream < 0) covered = a.start_ns;  // host activities (stream -1) are not clipped
    ns[order[j]] = std::max<int64_t>(0, a.end_ns - std::max(a.start_ns, covered));
    covered = std::max(covered, a.end_ns);
  }
  return ns;
}

std::vector<int64_t> overlapped_durations_ns(const std::vector<const Activity*>& work,
                                             const std::vector<int64_t>& exclusive_ns, const std::vector<char>& side) {
  using Span = std::pair<int64_t, int64_t>;
  // Each stream's busy time as its activities' exclusive intervals [end - exclusive, end]: a kernel that started
  // early under PDL and only waits in griddepcontrol.wait is not busy yet.
  std::map<std::pair<int, int64_t>, std::vector<Span>> spans;  // (device, stream) -> exclusive intervals
  for (size_t i = 0; i < work.size(); ++i) {
    const Activity& a = *work[i];
    if (a.stream >= 0 && exclusive_ns[i] > 0) spans[{a.device, a.stream}].push_back({a.end_ns - exclusive_ns[i], a.end_ns});
  }
  std::map<std::pair<int, int64_t>, std::vector<Span>> others;  // (device, stream) -> union of the other streams
  std::vector<int64_t> out(work.size(), 0);
  for (size_t i = 0; i < work.size(); ++i) {
    const Activity& a = *work[i];
    if (i >= side.size() || !side[i] || a.stream < 0 || exclusive_ns[i] <= 0) continue;
    auto it = others.find({a.device, a.stream});
    if (it == others.end()) {
      std::vector<Span> v;
      for (const auto& [key, sp] : spans)
        if (key.first == a.device && key.second != a.stream) v.insert(v.end(), sp.begin(), sp.end());
      it = others.emplace(std::make_pair(a.device, a.stream), merge_spans(std::move(v))).first;
    }
    const int64_t lo = a.end_ns - exclusive_ns[i], hi = a.end_ns;  // the exclusive interval
    const std::vector<Span>& m = it->second;
    auto k = std::lower_bound(m.begin(), m.end(), Span{lo, INT64_MIN},
                              [](const Span& x, const Span& y) { return x.second < y.first; });
    int64_t ns = 0;
    for (; k != m.end() && k->first < hi; ++k) ns += std::max<int64_t>(0, std::min(hi, k->second) - std::max(lo, k->first));
    out[i] = ns;
  }
  return out;
}

std::string op_label(const std::string& op) { return op.empty() ? "(unattributed)" : op; }

LayerTimeline layer_timeline(const std::vector<const Activity*>& work) {
  // (device, step, layer) -> its kernels in start order (a --tp profile holds every rank's kernels in one timeline)
  std::map<std::tuple<int64_t, int, int>, std::vector<const Activity*>> by_layer;
  for (const Activity* a : work)
    if (a->kind == ActivityKind::kernel && a->layer >= 0) by_layer[{a->device, a->step, a->layer}].push_back(a);
  LayerTimeline out;
  out.layers_total = int(by_layer.size());
  std::map<std::vector<std::string>, std::vector<const std::vector<const Activity*>*>> by_sequence;
  for (auto& [key, ks] : by_layer) {
    std::stable_sort(ks.begin(), ks.end(), [](const Activity* a, const Activity* b) { return a->start_ns < b->start_ns; });
    std::vector<std::string> seq;  // op and stream (main / side): a side kernel racing a main one is another order
    for (const Activity* a : ks) seq.push_back(a->side_stream ? a->op + " (side)" : a->op);
    by_sequence[std::move(seq)].push_back(&ks);
  }
  const std::vector<const std::vector<const Activity*>*>* best = nullptr;
  // The most common; a tie goes to the longer sequence, then to the first in the map's (lexicographic) order.
  for (const auto& [seq, samples] : by_sequence)
    if (!best || samples.size() > best->size() || (samples.size() == best->size() && seq.size() > best->front()->size()))
      best = &samples;
  if (!best || best->size() < 2) return out;
  out.layers = int(best->size());
  const size_t n = best->front()->size();
  std::vector<double> spans;
  std::vector<std::vector<double>> starts(n), ends(n);
  for (const auto* ks : *best) {
    const int64_t t0 = ks->front()->start_ns;
    int64_t last = t0;
    for (size_t i = 0; i < n; ++i) {
      starts[i].push_back(((*ks)[i]->start_ns - t0) / kNsPerUs);
      ends[i].push_back(((*ks)[i]->end_ns - t0) / kNsPerUs);
      last = std::max(last, (*ks)[i]->end_ns);
    }
    spans.push_back((last - t0) / kNsPerUs);
    const int layer = ks->front()->layer;
    if (out.example_layer < 0 || layer < out.example_layer) out.example_layer = layer;
  }
  out.span_us = median(spans);
  double latest = 0;
  for (size_t i = 0; i < n; ++i) {
    LayerTimelineRow r;
    r.op = (*best->front())[i]->op;
    r.side = (*best->front())[i]->side_stream;
    r.start_us = median(starts[i]);
    r.end_us = median(ends[i]);
    r.adds_us = std::max(0.0, r.end_us - latest);
    r.gap_us = i == 0 ? 0.0 : std::max(0.0, r.start_us - latest);
    latest = std::max(latest, r.end_us);
    out.rows.push_back(r);
  }
  return out;
}

Analysis analyze(const Timeline& t, const Peaks& peaks) {
  Analysis out;
  out.source = t.source;
  out.records_dropped = t.records_dropped;
  out.kernels_launched = t.kernels_launched;
  out.kernels_recorded = t.kernels_recorded;
  // A foreign trace file has no launch count (its kernels_recorded is the number of kernel events).
  out.launches_counted = t.source != "file" || t.kernels_launched > 0;
  out.trace_messages = t.messages;
  out.graph_replayed = t.graph_kernels > 0;
  out.complete = t.complete && t.records_dropped == 0 &&
                 (!out.launches_counted || t.kernels_launched == t.kernels_recorded);

  // Which activities are measured: device work of steps >= 0, or all of it when nothing has a step.
  bool any_step = false;
  for (const Activity& a : t.activities)
    if (is_device_work(a) && a.step >= 0) any_step = true;
  std::vector<const Activity*> work;
  for (const Activity& a : t.activities)
    if (is_device_work(a) && (!any_step || a.step >= 0)) work.push_back(&a);
  if (work.empty()) return out;

  // Each activity's time is its exclusive time on its stream (exclusive_durations_ns: kernels launched
  // with programmatic dependent launch overlap their predecessor).
  const std::vector<int64_t> excl = exclusive_durations_ns(work);
  // Side-stream work: activities of ops the engine declared on its side stream (Activity::side_stream, from
  // OpDesc::stream live or the trace's "side_stream" arg). A foreign trace declares none, so its streams (NCCL,
  // copies) are never called hidden: there is no evidence who waited for whom.
  std::vector<char> side(work.size(), 0);
  for (size_t i = 0; i < work.size(); ++i) side[i] = work[i]->side_stream;
  const std::vector<int64_t> hidden = overlapped_durations_ns(work, excl, side);

  // Per-step samples.
  std::map<int, std::pair<int64_t, int64_t>> span;  // step -> (first start, last end)
  std::map<int, int64_t> busy;                       // step -> sum of exclusive durations
  // step -> the step's device work as intervals, for its idle time (not for the CPU backend, whose "device work"
  // is host-timed ops)
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> intervals;
  const bool device_clock = t.source != "host-clock";
  for (size_t i = 0; i < work.size(); ++i) {
    const Activity* a = work[i];
    const int s = any_step ? a->step : -1;
    auto [it, fresh] = span.try_emplace(s, a->start_ns, a->end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, a->start_ns);
      it->second.second = std::max(it->second.second, a->end_ns);
    }
    busy[s] += excl[i];
    if (device_clock) intervals[s].push_back({a->start_ns, a->end_ns});
  }
  std::map<int, int64_t> step_range;  // host-clock: the step range's own duration
  if (t.source == "host-clock")
    for (const Range& r : t.ranges)
      if (r.kind == RangeKind::user_annotation && parse_step_name(r.name) >= 0)
        step_range[parse_step_name(r.name)] = r.end_ns - r.start_ns;
  // Idle time per step: the span minus the union of the step's device work over all streams (a gap in which the
  // device waited for the host).
  std::map<int, int64_t> idle;
  for (auto& [s, v] : intervals) {
    int64_t covered = 0;
    for (const auto& [lo, hi] : merge_spans(std::move(v))) covered += hi - lo;
    idle[s] = std::max<int64_t>(0, (span[s].second - span[s].first) - covered);
  }
  std::vector<double> times;
  for (const auto& [s, se] : span) {
    StepSample sample;
    sample.step = s;
    auto r = step_range.find(s);
    const int64_t ns = r != step_range.end() ? r->second : se.second - se.first;
    sample.time_us = ns / kNsPerUs;
    sample.kernel_us = busy[s] / kNsPerUs;
    sample.idle_us = idle.count(s) ? idle[s] / kNsPerUs : 0.0;
    out.gpu_idle_us += sample.idle_us;
    times.push_back(sample.time_us);
    out.steps.push_back(sample);
  }
  out.step_median_us = median(times);
  out.step_min_us = *std::min_element(times.begin(), times.end());
  out.step_max_us = *std::max_element(times.begin(), times.end());
  const double n_steps = static_cast<double>(out.steps.size());
  out.gpu_idle_us /= n_steps;
  for (const Activity* a : work) out.kernels_per_step += a->kind == ActivityKind::kernel;
  out.kernels_per_step /= n_steps;

  // Per (layer, op) cells. Declared bytes/FLOPs belong to the op instance (external id), not to each
  // of its kernels: count them once per instance.
  struct Acc {
    int64_t ns = 0, hidden_ns = 0;
    int64_t kernels = 0;
    double bytes = 0, flops = 0;
    std::set<uint64_t> instances;
  };
  std::map<std::tuple<int, std::pair<size_t, std::string>, std::string>, Acc> cells;
  std::map<std::string, int64_t> kernel_ns, kernel_calls;
  int64_t total_ns = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    const Activity* a = work[i];
    Acc& c = cells[{a->layer, op_rank(a->op), a->op}];
    c.ns += excl[i];
    c.hidden_ns += hidden[i];
    c.kernels += 1;
    if (a->external_id == 0 || c.instances.insert(a->external_id).second) {
      c.bytes += a->bytes;
      c.flops += a->flops;
    }
    kernel_ns[a->name] += excl[i];
    kernel_calls[a->name] += 1;
    total_ns += excl[i];
  }
  out.total_kernel_us = total_ns / kNsPerUs / n_steps;

  std::map<std::pair<size_t, std::string>, OpSummary> by_op;
  for (const auto& [key, c] : cells) {
    OpCell cell;
    cell.layer = std::get<0>(key);
    cell.op = std::get<2>(key);
    cell.time_us = c.ns / kNsPerUs / n_steps;
    cell.kernels = c.kernels / n_steps;
    cell.bytes = c.bytes / n_steps;
    cell.flops = c.flops / n_steps;
    cell.overlapped_us = c.hidden_ns / kNsPerUs / n_steps;
    out.layer_ops.push_back(cell);
    OpSummary& s = by_op[std::get<1>(key)];
    s.op = cell.op;
    s.time_us += cell.time_us;
    s.overlapped_us += cell.overlapped_us;
    s.bytes += cell.bytes;
    s.flops += cell.flops;
  }
  for (auto& [rank, s] : by_op) {
    fill_roofline(s, out.step_median_us, peaks);
    out.ops.push_back(s);
    if (s.op.rfind("attn.", 0) == 0) out.attention_us += s.time_us;
  }

  for (const auto& [name, ns] : kernel_ns) {
    KernelStat k;
    k.name = name;
    k.calls = kernel_calls[name];
    k.total_us = ns / kNsPerUs;
    k.mean_us = k.total_us / static_cast<double>(k.calls);
    k.share = total_ns > 0 ? static_cast<double>(ns) / static_cast<double>(total_ns) : 0;
    out.top_kernels.push_back(k);
  }
  std::stable_sort(out.top_kernels.begin(), out.top_kernels.end(),
                   [](const KernelStat& a, const KernelStat& b) { return a.total_us > b.total_us; });
  out.kernels_distinct = int64_t(out.top_kernels.size());
  if (out.top_kernels.size() > 20) out.top_kernels.resize(20);

  out.layer_timeline = layer_timeline(work);
  out.hotspots = find_hotspots(work, excl, out, peaks);
  for (const Hotspot& h : out.hotspots)
    if (h.kind == "kv_dtype_cast") out.cast_us = h.time_us;
  return out;
}

}  // namespace glm5
