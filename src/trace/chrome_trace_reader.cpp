// read_chrome_trace: Chrome / Kineto trace JSON (plain or gzip) -> Timeline (see chrome_trace.h).
//
// Streaming, in memory proportional to the events kept, not to the file:
//  1. ByteSource maps a plain file and hands it on in 4 MiB windows, dropping each once passed (no
//     copy; the file does not stay in the RSS); gzip data (found by its magic bytes 1f 8b, whatever
//     the name) is read in 4 MiB chunks and inflated with zlib as it goes, multi-member streams included.
//  2. Splitter, a small state machine that knows only strings, escapes and bracket depth, cuts the
//     elements of the top-level "traceEvents" array out of the byte stream into batches of about
//     2 MiB ("[e1,e2,...]"); everything else (the "skeleton": the document with each traceEvents
//     array left empty, a few hundred bytes in practice) is kept as text.
//  3. Each batch is parsed and fully validated by simdjson's DOM parser (one parser reused, so its
//     buffers stay the size of a batch); the skeleton by nlohmann::json (metadata:
//     baseTimeNanoseconds, deviceProperties, glm5prof). Events keep times relative to the base until
//     the end, because Kineto writes baseTimeNanoseconds after traceEvents.
// Measured speed and memory: reports/2026-11-29-trace-reader.md (tools/bench_trace_reader.sh).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "common/json_excerpt.h"
#include "common/error.h"
#include "common/input_file.h"
#include "trace/chrome_trace.h"

namespace glm5 {

namespace {

using nlohmann::json;
namespace dom = simdjson::dom;

// ---------------------------------------------------------------------------------------------------
// Metadata (skeleton, nlohmann)

// An integer arg that T cannot hold (layer 4294967298 as an int, a negative count as uint64_t) or that is not an
// integer (kNoInt from as_int) is treated as absent: the fallback, never a wrapped value.
constexpr int64_t kNoInt = INT64_MIN;
template <class T>
T fit_int(int64_t v, T fallback) {
  if (v == kNoInt) return fallback;
  if constexpr (std::is_unsigned_v<T>) {
    return v >= 0 && uint64_t(v) <= std::numeric_limits<T>::max() ? static_cast<T>(v) : fallback;
  } else {
    return v >= int64_t(std::numeric_limits<T>::min()) && v <= int64_t(std::numeric_limits<T>::max()) ? static_cast<T>(v)
                                                                                                          : fallback;
  }
}

int64_t as_int(const json& v, int64_t fallback = 0) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(INT64_MAX) ? v.get<int64_t>() : fallback;
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();  // out of int64 range (or NaN): the cast would be undefined
    return std::isfinite(d) && std::fabs(d) < 9e18 && d == std::floor(d) ? static_cast<int64_t>(d) : fallback;
  }
  return fallback;  // strings such as "Spans"
}

template <class T>
T arg(const json& args, const char* key, T fallback) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) return it->is_string() ? it->get<std::string>() : fallback;
  else if constexpr (std::is_floating_point_v<T>) return it->is_number() ? it->get<double>() : fallback;
  else return fit_int<T>(as_int(*it, kNoInt), fallback);
}

// ---------------------------------------------------------------------------------------------------
// Events (simdjson DOM); the same rules as the metadata helpers above.

int64_t as_int(dom::element v, int64_t fallback = 0) {
  switch (v.type()) {
    case dom::element_type::INT64: return int64_t(v);
    case dom::element_type::UINT64: {
      const uint64_t u = uint64_t(v);
      return u <= uint64_t(INT64_MAX) ? static_cast<int64_t>(u) : fallback;
    }
    case dom::element_type::DOUBLE: {
      const double d = double(v);  // a fractional id or index is not one: the fallback, as for a string
      return std::isfinite(d) && std::fabs(d) < 9e18 && d == std::floor(d) ? static_cast<int64_t>(d) : fallback;
    }
    default: return fallback;
  }
}

bool is_number(dom::element v) {
  const dom::element_type t = v.type();
  return t == dom::element_type::INT64 || t == dom::element_type::UINT64 || t == dom::element_type::DOUBLE;
}

double as_double(dom::element v) {
  switch (v.type()) {
    case dom::element_type::INT64: return double(int64_t(v));
    case dom::element_type::UINT64: return double(uint64_t(v));
    default: return double(v);
  }
}

// The fields of an event's "args" that the Timeline keeps (absent: not set).
struct EventArgs {
  const dom::element* device = nullptr;
  const dom::element* stream = nullptr;
  const dom::element* correlation = nullptr;
  const dom::element* external_id = nullptr;
  const dom::element* grid = nullptr;
  const dom::element* block = nullptr;
  const dom::element* step = nullptr;
  const dom::element* layer = nullptr;
  const dom::element* op = nullptr;
  const dom::element* flops = nullptr;
  const dom::element* bytes = nullptr;
  const dom::element* op_bytes = nullptr;
  const dom::element* side_stream = nullptr;
};

template <class T>
T arg(const dom::element* v, T fallback) {
  if (!v || v->is_null()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return v->is_string() ? std::string(std::string_view(*v)) : fallback;
  } else if constexpr (std::is_floating_point_v<T>) {
    return is_number(*v) ? as_double(*v) : fallback;
  } else {
    return fit_int<T>(as_int(*v, kNoInt), fallback);
  }
}

Dim3 dim3_arg(const dom::element* v) {
  if (!v || !v->is_array()) return {};
  const dom::array a(*v);
  if (a.size() != 3) return {};
  return {static_cast<int>(as_int(a.at(0).value_unsafe())), static_cast<int>(as_int(a.at(1).value_unsafe())),
          static_cast<int>(as_int(a.at(2).value_unsafe()))};
}

bool kind_of(std::string_view cat, ActivityKind& kind) {
  static const std::map<std::string_view, ActivityKind> m = {
      {"kernel", ActivityKind::kernel},        {"gpu_memcpy", ActivityKind::memcpy},
      {"gpu_memset", ActivityKind::memset},    {"cuda_runtime", ActivityKind::runtime},
      {"cuda_driver", ActivityKind::driver},   {"cpu_op", ActivityKind::cpu_op},
      {"overhead", ActivityKind::overhead}};
  auto it = m.find(cat);
  if (it == m.end()) return false;
  kind = it->second;
  return true;
}

// Plausibility limits [us]. A duration over kMaxPlausibleDurationUs (1e15 us, 31 years; chrome_trace.h) is
// corrupt. Timestamps may be absolute (Kineto before baseTimeNanoseconds: microseconds since the epoch, ~1.7e15
// today), so they get a wider bound that still keeps base + ts * 1e3 inside int64 nanoseconds (9.2e18).
constexpr double kMaxTsUs = 4e15;
constexpr int64_t kMaxBaseNs = 4'000'000'000'000'000'000;

// Typed access to the fields of traceEvents[index]; every failure is one line naming the trace, the
// event index and the field, e.g. "trace 'x.json': traceEvents[3].dur: expected a number".
class EventFields {
 public:
  EventFields(const std::string& path, uint64_t index) : path_(path), index_(index) {}

  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw Error("trace '" + path_ + "': traceEvents[" + std::to_string(index_) + "]." + key + ": " + what);
  }
  // A string field; "" when absent or null.
  std::string_view str(const dom::element* v, const char* key) const {
    if (!v || v->is_null()) return {};
    if (!v->is_string()) fail(key, "expected a string, got " + short_dump(*v));
    return std::string_view(*v);
  }
  // A time field in microseconds: a finite number in [0, max_us]. `*fallback` when absent (fallback ==
  // nullptr: the field is required).
  double micros(const dom::element* e, const char* key, double max_us, const double* fallback) const {
    if (!e || e->is_null()) {
      if (fallback) return *fallback;
      fail(key, "missing (expected a number of microseconds)");
    }
    if (!is_number(*e)) fail(key, "expected a number of microseconds, got " + short_dump(*e));
    const double v = as_double(*e);
    if (!std::isfinite(v)) fail(key, "expected a finite number of microseconds, got " + short_dump(*e));
    if (v < 0) fail(key, "must not be negative, got " + short_dump(*e));
    if (v > max_us) fail(key, "is " + short_dump(*e) + " us, beyond the plausible limit of " + limit(max_us) + " us");
    return v;
  }
  // An amount of our own args (bytes, FLOPs): a finite number in [0, 1e21]; `fallback` when absent or null. A
  // negative or astronomical value made the report print 46-digit GB/s (bad-input review, session 16).
  double amount(const dom::element* e, const char* key, double fallback) const {
    if (!e || e->is_null()) return fallback;
    if (!is_number(*e)) fail(key, "expected a number, got " + short_dump(*e));
    const double v = as_double(*e);
    if (!std::isfinite(v) || v < 0 || v > 1e21) fail(key, "expected a number in [0, 1e21], got " + short_dump(*e));
    return v;
  }

  // v as JSON, cut to 40 characters (for messages).
  static std::string short_dump(dom::element v) {
    std::string s = simdjson::minify(v);
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }

 private:
  static std::string limit(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
  }
  const std::string& path_;
  uint64_t index_;
};

// Events are stored with times relative to baseTimeNanoseconds (added at the end).
class EventSink {
 public:
  EventSink(const std::string& path, Timeline& t) : path_(path), t_(t) {}

  void add(dom::element element, uint64_t index) {
    // A number, string or list among the events is a corrupt trace, not an event to skip silently (a trace of
    // only such entries read as "no kernels were recorded" with exit 0; bad-input review, session 29).
    if (!element.is_object())
      throw Error("trace '" + path_ + "': traceEvents[" + std::to_string(index) + "]: expected an event object, got " +
                  EventFields::short_dump(element));
    const dom::object e(element);
    const dom::element *ph = nullptr, *cat_v = nullptr, *name_v = nullptr, *ts = nullptr, *dur = nullptr,
                       *pid_v = nullptr, *tid_v = nullptr, *args_v = nullptr;
    // The last of duplicate keys wins (as nlohmann::json's parser has it).
    dom::element slots[8];
    for (dom::key_value_pair kv : e) {
      const std::string_view k = kv.key;
      int s = -1;
      if (k == "ph") s = 0;
      else if (k == "cat") s = 1;
      else if (k == "name") s = 2;
      else if (k == "ts") s = 3;
      else if (k == "dur") s = 4;
      else if (k == "pid") s = 5;
      else if (k == "tid") s = 6;
      else if (k == "args") s = 7;
      if (s < 0) continue;
      slots[s] = kv.value;
      const dom::element* p = &slots[s];
      switch (s) {
        case 0: ph = p; break;
        case 1: cat_v = p; break;
        case 2: name_v = p; break;
        case 3: ts = p; break;
        case 4: dur = p; break;
        case 5: pid_v = p; break;
        case 6: tid_v = p; break;
        default: args_v = p; break;
      }
    }
    const EventFields f(path_, index);
    if (f.str(ph, "ph") != "X") return;
    const std::string_view cat = f.str(cat_v, "cat");
    EventArgs a;
    dom::element arg_slots[13];
    // args that are not an object dropped every field the attribution needs (session 29: a string there turned a
    // trace's kernels into "0 kernels per step" with exit 0).
    if (args_v && !args_v->is_null() && !args_v->is_object()) f.fail("args", "expected an object, got " + EventFields::short_dump(*args_v));
    if (args_v && args_v->is_object()) {
      for (dom::key_value_pair kv : dom::object(*args_v)) {
        const std::string_view k = kv.key;
        const dom::element** dst = nullptr;
        int s = 0;
        switch (k.size()) {  // a cheap first cut: most args are none of ours
          case 2: if (k == "op") dst = &a.op, s = 0; break;
          case 4: if (k == "grid") dst = &a.grid, s = 1; else if (k == "step") dst = &a.step, s = 2; break;
          case 5:
            if (k == "block") dst = &a.block, s = 3;
            else if (k == "layer") dst = &a.layer, s = 4;
            else if (k == "flops") dst = &a.flops, s = 5;
            else if (k == "bytes") dst = &a.bytes, s = 6;
            break;
          case 6: if (k == "device") dst = &a.device, s = 7; else if (k == "stream") dst = &a.stream, s = 8; break;
          case 8: if (k == "op_bytes") dst = &a.op_bytes, s = 9; break;
          case 11:
            if (k == "correlation") dst = &a.correlation, s = 10;
            else if (k == "External id") dst = &a.external_id, s = 11;
            else if (k == "side_stream") dst = &a.side_stream, s = 12;
            break;
          default: break;
        }
        if (!dst) continue;
        arg_slots[s] = kv.value;
        *dst = &arg_slots[s];
      }
    }
    const std::string_view name = f.str(name_v, "name");
    const double zero = 0.0;
    const double ts_us = f.micros(ts, "ts", kMaxTsUs, nullptr);
    const double dur_us = f.micros(dur, "dur", kMaxPlausibleDurationUs, &zero);
    const int64_t start = std::llround(ts_us * 1e3), end = start + std::llround(dur_us * 1e3);
    const int64_t pid = pid_v ? as_int(*pid_v) : 0, tid = tid_v ? as_int(*tid_v) : 0;
    // torch.profiler(with_modules=True) draws each module call as a python_function span: a layer's span
    // ("nn.Module: DeepseekV2DecoderLayer_3", parse_layer_name) is kept as a host range, like a
    // record_function "layer.N", so that kernels launched inside it land on that layer. Other Python spans
    // are not kept.
    const bool layer_module = cat == "python_function" && parse_layer_name(std::string(name)) >= 0;
    const bool is_range = cat == "user_annotation" || cat == "gpu_user_annotation" || layer_module;
    ActivityKind kind = ActivityKind::kernel;
    if (!is_range && !kind_of(cat, kind)) return;
    const bool device_kind =
        !is_range && (kind == ActivityKind::kernel || kind == ActivityKind::memcpy || kind == ActivityKind::memset);
    // Every kept event needs its duration (complete "X" events carry dur in the Chrome trace format): a GPU activity
    // would count as 0 us, a host call or op would be an empty span no launch falls inside (its kernels lost their op),
    // a ProfilerStep#N range read as 0 us merged its step into the one before (bad-input review, session 29).
    if (!dur || dur->is_null())
      f.fail("dur", std::string("missing (") +
                        (is_range ? "a range" : device_kind ? "a GPU activity" : "a host call or op") +
                        " needs its duration in microseconds)");
    if (is_range) {
      Range r;
      r.name = name;
      r.start_ns = start;
      r.end_ns = end;
      r.kind = cat == "gpu_user_annotation" ? RangeKind::gpu_user_annotation : RangeKind::user_annotation;
      r.thread = tid;
      if (r.kind == RangeKind::gpu_user_annotation) r.device = static_cast<int>(pid);
      r.step = arg<int>(a.step, -1);
      r.layer = arg<int>(a.layer, -1);
      r.op = arg<std::string>(a.op, "");
      t_.ranges.push_back(std::move(r));
      return;
    }
    Activity x;
    x.kind = kind;
    x.name = name;
    x.start_ns = start;
    x.end_ns = end;
    // A device activity's device and stream place it on the timeline (and in the idle / overlap analysis); a value
    // that is not an integer is a corrupt trace, not the pid / tid to fall back on (bad-input attack, session 31),
    // and a kernel needs its name (null passed as an unnamed kernel, a number did not).
    if (device_kind) {
      for (const auto& [v, key] : {std::pair{a.device, "args.device"}, std::pair{a.stream, "args.stream"}})
        if (v && !v->is_null() && !v->is_int64() && !v->is_uint64())
          f.fail(key, "expected an integer, got " + EventFields::short_dump(*v));
      if (name.empty()) f.fail("name", "missing (a device activity needs its name)");
    }
    x.device = device_kind ? arg<int>(a.device, static_cast<int>(pid)) : -1;
    x.stream = device_kind ? arg<int64_t>(a.stream, tid) : -1;
    x.thread = device_kind ? 0 : tid;
    // The correlation id links a kernel to its launch (and so to its step and op): one that is not a non-negative
    // integer is a corrupt trace, not an id to drop silently.
    if (a.correlation && !a.correlation->is_null() && !a.correlation->is_uint64() && !a.correlation->is_int64())
      f.fail("args.correlation", "expected an integer id, got " + EventFields::short_dump(*a.correlation));
    x.correlation_id = arg<uint64_t>(a.correlation, 0);
    x.external_id = arg<uint64_t>(a.external_id, 0);
    x.grid = dim3_arg(a.grid);
    x.block = dim3_arg(a.block);
    x.step = arg<int>(a.step, -1);  // (an index the field cannot hold counts as absent: TraceReader tests)
    x.layer = arg<int>(a.layer, -1);
    x.op = arg<std::string>(a.op, "");
    x.flops = f.amount(a.flops, "args.flops", 0.0);
    x.side_stream = device_kind && arg<double>(a.side_stream, 0.0) != 0.0;
    if (kind == ActivityKind::memcpy || kind == ActivityKind::memset) {
      x.bytes_copied = uint64_t(f.amount(a.bytes, "args.bytes", 0.0));
      x.bytes = f.amount(a.op_bytes, "args.op_bytes", 0.0);
    } else {
      x.bytes = f.amount(a.bytes, "args.bytes", 0.0);
    }
    t_.activities.push_back(std::move(x));
  }

 private:
  const std::string& path_;
  Timeline& t_;
};

// ---------------------------------------------------------------------------------------------------
// Bytes: the file as it is, or inflated when it starts with the gzip magic bytes.

class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    // A FIFO without a writer would block open() forever, /dev/zero would fill memory: files only.
    require_regular_file(path, "a trace .json or .json.gz file");
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error("trace '" + path + "': cannot open the file (" + std::strerror(errno) + ")");
    struct stat st {};
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 2) {
      // A plain regular file is mapped and read in place, window by window (no copy into a buffer);
      // each window is dropped from the process once passed, so the file never adds to the RSS.
      unsigned char magic[2] = {0, 0};
      if (::pread(fd_, magic, 2, 0) == 2 && !(magic[0] == 0x1f && magic[1] == 0x8b)) {
        void* m = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd_, 0);
        if (m != MAP_FAILED) {
          map_ = static_cast<const char*>(m);
          map_size_ = size_t(st.st_size);
          ::madvise(m, map_size_, MADV_SEQUENTIAL);
          return;
        }
      }
    }
#ifdef POSIX_FADV_SEQUENTIAL
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    raw_.resize(kChunk);
    raw_len_ = fill(raw_.data(), raw_.size());
    gzip_ = raw_len_ >= 2 && (unsigned char)raw_[0] == 0x1f && (unsigned char)raw_[1] == 0x8b;
    if (gzip_) {
      std::memset(&zs_, 0, sizeof zs_);
      if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) throw Error("trace '" + path + "': zlib inflateInit2 failed");
      zs_open_ = true;
      zs_.next_in = reinterpret_cast<Bytef*>(raw_.data());
      zs_.avail_in = static_cast<uInt>(raw_len_);
    }
  }
  ~ByteSource() {
    if (map_) ::munmap(const_cast<char*>(map_), map_size_);
    if (zs_open_) inflateEnd(&zs_);
    if (fd_ >= 0) ::close(fd_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return gzip_; }
  bool mapped() const { return map_ != nullptr; }
  // About how many bytes of JSON there are: the file's size, the gzip trailer's (mod 2^32), or 0.
  uint64_t size_hint() const {
    if (map_) return map_size_;
    struct stat st {};
    unsigned char tail[4];
    if (!gzip_ || ::fstat(fd_, &st) != 0 || st.st_size < 18 || ::pread(fd_, tail, 4, st.st_size - 4) != 4) return 0;
    const uint64_t isize = tail[0] | tail[1] << 8 | tail[2] << 16 | uint64_t(tail[3]) << 24;
    return isize >= uint64_t(st.st_size) ? isize : 0;
  }

  // The next piece of JSON text: a window of the mapped file, or read / inflated into `buf`. Valid
  // until the next call; empty at the end.
  std::string_view next(std::vector<char>& buf) {
    if (map_) {
      if (map_prev_ < map_pos_) ::madvise(const_cast<char*>(map_) + map_prev_, map_pos_ - map_prev_, MADV_DONTNEED);
      map_prev_ = map_pos_;
      const size_t n = std::min(kChunk, map_size_ - map_pos_);
      map_pos_ += n;
      return {map_ + map_prev_, n};
    }
    return {buf.data(), read(buf.data(), buf.size())};
  }

  // Up to `cap` bytes of JSON text into `out`; 0 at the end. Throws on a read error or bad gzip data.
  size_t read(char* out, size_t cap) {
    if (!gzip_) {
      if (raw_pos_ < raw_len_) {  // the first chunk, read to look for the magic bytes
        const size_t n = std::min(cap, raw_len_ - raw_pos_);
        std::memcpy(out, raw_.data() + raw_pos_, n);
        raw_pos_ += n;
        return n;
      }
      return fill(out, cap);
    }
    size_t produced = 0;
    while (produced == 0) {
      if (stream_end_) {
        // Another gzip member may follow (as `cat a.gz b.gz` makes); anything else is an error.
        if (zs_.avail_in < 2 && !refill_keep()) {
          if (zs_.avail_in == 0) return 0;
          trailing();
        }
        if (zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b) trailing();
        inflateReset(&zs_);
        stream_end_ = false;
      }
      if (zs_.avail_in == 0 && !refill())
        throw Error("trace '" + path_ + "': truncated gzip data: the compressed stream ends at byte " +
                    std::to_string(compressed_offset()) + " before its end marker (after " +
                    std::to_string(out_total_) + " bytes of JSON)");
      zs_.next_out = reinterpret_cast<Bytef*>(out);
      zs_.avail_out = static_cast<uInt>(std::min<size_t>(cap, UINT_MAX));
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      produced = std::min<size_t>(cap, UINT_MAX) - zs_.avail_out;
      if (rc == Z_STREAM_END) {
        stream_end_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw Error("trace '" + path_ + "': corrupt gzip data near compressed byte " + std::to_string(compressed_offset()) +
                    " (zlib: " + (zs_.msg ? zs_.msg : "error " + std::to_string(rc)) + ")");
      }
    }
    out_total_ += produced;
    // A gzip bomb (a few MB that inflate to many GB of padding) would keep the reader busy for minutes: real
    // traces compress 5-30x, so more than kMaxInflateRatio x the compressed bytes read so far, past 256 MiB, is refused.
    if (out_total_ > (uint64_t(256) << 20) && out_total_ > kMaxInflateRatio * std::max<uint64_t>(compressed_offset(), 1))
      throw Error("trace '" + path_ + "': gzip data inflates more than " + std::to_string(kMaxInflateRatio) +
                  "x (" + std::to_string(out_total_) + " bytes of JSON from " + std::to_string(compressed_offset()) +
                  " compressed bytes): not a trace");
    return produced;
  }

 private:
  static constexpr size_t kChunk = size_t(4) << 20;
  static constexpr uint64_t kMaxInflateRatio = 200;

  size_t fill(char* out, size_t cap) {
    size_t n = 0;
    while (n < cap) {
      const ssize_t r = ::read(fd_, out + n, cap - n);
      if (r == 0) break;
      if (r < 0) {
        if (errno == EINTR) continue;
        throw Error("trace '" + path_ + "': cannot read the file (" + std::strerror(errno) + ")");
      }
      n += size_t(r);
    }
    file_read_ += n;
    return n;
  }
  // Next compressed chunk into raw_ (the input was all used). False at the end of the file.
  bool refill() {
    raw_len_ = fill(raw_.data(), raw_.size());
    zs_.next_in = reinterpret_cast<Bytef*>(raw_.data());
    zs_.avail_in = static_cast<uInt>(raw_len_);
    return raw_len_ > 0;
  }
  // Keeps the unused input and appends more. False when there is no more.
  bool refill_keep() {
    const size_t keep = zs_.avail_in;
    std::memmove(raw_.data(), zs_.next_in, keep);
    const size_t n = fill(raw_.data() + keep, raw_.size() - keep);
    raw_len_ = keep + n;
    zs_.next_in = reinterpret_cast<Bytef*>(raw_.data());
    zs_.avail_in = static_cast<uInt>(raw_len_);
    return raw_len_ >= 2;
  }
  uint64_t compressed_offset() const { return file_read_ - zs_.avail_in; }
  [[noreturn]] void trailing() const {
    throw Error("trace '" + path_ + "': unexpected data after the end of the gzip stream at compressed byte " +
                std::to_string(compressed_offset()));
  }

  const std::string& path_;
  int fd_ = -1;
  const char* map_ = nullptr;  // the mapped file (plain, regular files)
  size_t map_size_ = 0, map_pos_ = 0, map_prev_ = 0;
  std::vector<char> raw_;
  size_t raw_len_ = 0, raw_pos_ = 0;
  uint64_t file_read_ = 0;
  bool gzip_ = false, zs_open_ = false, stream_end_ = false;
  uint64_t out_total_ = 0;  // JSON bytes inflated so far
  z_stream zs_{};
};

// ---------------------------------------------------------------------------------------------------
// Splitter: cuts the elements of the top-level "traceEvents" array into batches, keeps the rest.

// The bytes that change the Splitter's state inside an element: '"', '{', '}', '[', ']'.
constexpr auto kBracketOrQuote = [] {
  std::array<bool, 256> t{};
  for (unsigned char c : {'"', '{', '}', '[', ']'}) t[c] = true;
  return t;
}();

class Splitter {
 public:
  // `on_batch(text, len, first_index, starts, base_offset)`: text = "[e_k,...,e_m]" with
  // SIMDJSON_PADDING readable bytes after it, starts = offsets in `text` where each element begins,
  // base_offset = file offset of text[1].
  using BatchFn = std::function<void(const char*, size_t, uint64_t, const std::vector<uint32_t>&, uint64_t)>;

  Splitter(const std::string& path, BatchFn on_batch) : path_(path), on_batch_(std::move(on_batch)) {
    skeleton_map_.push_back({0, 0});
  }

  // Feeds the next `n` bytes of the document (the file offset of p[0] is the count fed before).
  void feed(const char* p, size_t n) {
    size_t i = 0;
    mark_ = 0;
    auto flush_copy = [&](size_t upto) {
      if (upto > mark_) (in_events_ ? batch_ : skeleton_).append(p + mark_, upto - mark_);
      mark_ = upto;
    };
    while (i < n) {
      if (in_string_) {
        if (escape_) {
          escape_ = false;
          ++i;
          continue;
        }
        const size_t seg = i;
        const char* q = static_cast<const char*>(std::memchr(p + i, '"', n - i));
        const size_t end = q ? size_t(q - p) : n;
        size_t k = end;  // backslashes right before the quote (or the chunk's end)
        while (k > seg && p[k - 1] == '\\') --k;
        const bool odd = ((end - k) & 1) != 0;
        if (key_capture_) capture_key(p + seg, end - seg);
        if (!q) {
          escape_ = odd;
          i = n;
          break;
        }
        i = end + 1;
        if (odd) {  // an escaped quote: still in the string
          if (key_capture_) capture_key("\"", 1);
          continue;
        }
        in_string_ = false;
        key_capture_ = false;
        continue;
      }
      if (depth_ > 2) {  // inside an element (or a nested value): only strings and brackets matter
        while (i < n && !kBracketOrQuote[static_cast<unsigned char>(p[i])]) ++i;
        if (i == n) break;
      }
      const char c = p[i];
      switch (c) {
        case ' ': case '\n': case '\r': case '\t':
          break;
        case '"':
          element_start(i);
          in_string_ = true;
          if (depth_ == 1 && !in_events_) {
            key_capture_ = true;
            key_.clear();
            key_overflow_ = false;
            events_key_ = false;
          }
          break;
        case '{': case '[':
          element_start(i);
          if (depth_ == 0 && !root_seen_) root_object_ = c == '{';
          root_seen_ = true;
          if (depth_ == 1 && root_object_ && c == '[' && events_key_ && !in_events_) {
            flush_copy(i + 1);  // '[' stays in the skeleton; the elements go to batches
            in_events_ = true;
            depth_ = 2;
            batch_begin(offset_ + i + 1);
            after_comma_ = false;
            want_element_ = true;
            break;
          }
          events_key_ = false;
          ++depth_;
          break;
        case '}': case ']':
          if (in_events_ && depth_ == 2) {
            if (c != ']') fail_at(offset_ + i, "'}' where the traceEvents array expected ']' or ','");
            if (after_comma_) fail_at(offset_ + i, "a ',' right before ']' in traceEvents");
            flush_copy(i);
            flush_batch();
            in_events_ = false;
            depth_ = 1;
            skeleton_map_.push_back({skeleton_.size(), offset_ + i});
            break;
          }
          events_key_ = false;
          if (depth_ > 0) --depth_;
          break;
        case ',':
          if (in_events_ && depth_ == 2) {
            if (want_element_) fail_at(offset_ + i, "a ',' with no event before it in traceEvents");
            if (batch_.size() >= kBatchBytes) {
              flush_copy(i);
              flush_batch();
              batch_begin(offset_ + i + 1);
              mark_ = i + 1;  // the comma between two batches is dropped
            }
            after_comma_ = true;
            want_element_ = true;
            break;
          }
          events_key_ = false;
          break;
        case ':':
          if (depth_ == 1 && !in_events_) events_key_ = key_ == "traceEvents" && !key_overflow_;
          break;
        default:
          element_start(i);
          events_key_ = false;
          break;
      }
      ++i;
    }
    flush_copy(n);
    offset_ += n;
  }

  // The end of the input: a document cut short is an error; returns the skeleton.
  const std::string& finish() {
    if (offset_ == 0) fail_at(0, "the file is empty");
    if (in_string_ || depth_ > 0 || in_events_) {
      std::string what = std::string("the file ends inside ") +
                         (in_string_ ? "a string" : in_events_ && depth_ == 2 ? "the traceEvents array" : "an object or array");
      if (in_events_ && events_seen_ > 0) what += (depth_ > 2 || in_string_ ? " in traceEvents[" : " after traceEvents[") +
                                                  std::to_string(events_seen_ - 1) + "]";
      fail_at(offset_, what + "; truncated?");
    }
    return skeleton_;
  }

  // File offset of skeleton byte `pos`.
  uint64_t file_offset(uint64_t pos) const {
    auto it = std::upper_bound(skeleton_map_.begin(), skeleton_map_.end(), pos,
                               [](uint64_t v, const std::pair<uint64_t, uint64_t>& m) { return v < m.first; });
    --it;
    return it->second + (pos - it->first);
  }
  uint64_t bytes() const { return offset_; }

  [[noreturn]] void fail_at(uint64_t offset, const std::string& what) const {
    throw Error("trace '" + path_ + "': not valid JSON (" + what + ") at byte " + std::to_string(offset));
  }

 private:
  static constexpr size_t kBatchBytes = size_t(2) << 20;

  void element_start(size_t i) {
    if (in_events_ && depth_ == 2 && want_element_) {
      starts_.push_back(static_cast<uint32_t>(batch_.size() + (i - mark_)));
      want_element_ = false;
      after_comma_ = false;
      ++events_seen_;
    }
  }
  void capture_key(const char* s, size_t n) {
    if (key_.size() + n > 64) key_overflow_ = true;
    else key_.append(s, n);
  }
  void batch_begin(uint64_t file_offset) {
    batch_.clear();
    batch_.push_back('[');
    starts_.clear();
    batch_offset_ = file_offset;
  }
  void flush_batch() {
    batch_.push_back(']');
    const size_t len = batch_.size();
    batch_.append(simdjson::SIMDJSON_PADDING, ' ');
    on_batch_(batch_.data(), len, first_index_, starts_, batch_offset_);
    first_index_ += starts_.size();
    batch_.clear();
    starts_.clear();
  }

  const std::string& path_;
  BatchFn on_batch_;
  std::string skeleton_, batch_, key_;
  std::vector<std::pair<uint64_t, uint64_t>> skeleton_map_;  // (skeleton offset, file offset) at each seam
  std::vector<uint32_t> starts_;
  uint64_t offset_ = 0, batch_offset_ = 0, first_index_ = 0, events_seen_ = 0;
  size_t mark_ = 0;  // feed(): p[mark_, i) not yet copied to the skeleton or the batch
  int depth_ = 0;
  bool in_string_ = false, escape_ = false, key_capture_ = false, key_overflow_ = false, events_key_ = false;
  bool in_events_ = false, after_comma_ = false, want_element_ = false, root_seen_ = false, root_object_ = false;
};

struct Interval {
  int64_t start, end;
  size_t index;
};

// For each query time (per thread), the innermost interval containing it (intervals nest properly on
// a thread), or with `outermost` the outermost one. Sweep over intervals sorted by (start asc, end desc) with a stack. Returns SIZE_MAX if none.
std::vector<size_t> innermost(std::vector<Interval> iv, const std::vector<int64_t>& queries, bool outermost = false) {
  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  std::vector<size_t> order(queries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return queries[a] < queries[b]; });
  std::vector<size_t> out(queries.size(), SIZE_MAX);
  std::vector<const Interval*> stack;
  size_t next = 0;
  for (size_t q : order) {
    const int64_t ts = queries[q];
    while (next < iv.size() && iv[next].start <= ts) {
      while (!stack.empty() && stack.back()->end < iv[next].start) stack.pop_back();
      stack.push_back(&iv[next++]);
    }
    while (!stack.empty() && stack.back()->end < ts) stack.pop_back();
    if (stack.empty()) continue;
    out[q] = stack.back()->index;
    if (outermost)  // the lowest open interval that still contains ts (overlapping ones may have ended)
      for (const Interval* s : stack)
        if (s->end >= ts) {
          out[q] = s->index;
          break;
        }
  }
  return out;
}

}  // namespace

Timeline read_chrome_trace(const std::string& path) {
  ByteSource src(path);
  Timeline t;
  t.source = "file";
  // Address space only (pages are touched as events arrive): saves the copies and page faults of
  // growing a vector of a million activities. Kineto writes >= 400 bytes per event it keeps.
  t.activities.reserve(std::min<uint64_t>(src.size_hint() / 400, uint64_t(1) << 26));
  EventSink sink(path, t);
  dom::parser parser;
  std::string one;  // one element, padded, to find the one a failed batch stumbled on
  const char* where = src.gzip() ? " of the uncompressed JSON" : "";
  auto on_batch = [&](const char* text, size_t len, uint64_t first, const std::vector<uint32_t>& starts, uint64_t base) {
    dom::element doc;
    const simdjson::error_code err = parser.parse(reinterpret_cast<const uint8_t*>(text), len, false).get(doc);
    if (err) {
      // Parse each element alone to name the first bad one and where it starts.
      for (size_t k = 0; k < starts.size(); ++k) {
        size_t end = k + 1 < starts.size() ? starts[k + 1] : len - 1;
        while (end > starts[k] && (text[end - 1] == ',' || std::isspace((unsigned char)text[end - 1]))) --end;
        one.assign(text + starts[k], end - starts[k]);
        const size_t n = one.size();
        one.append(simdjson::SIMDJSON_PADDING, ' ');
        dom::element ignored;
        const simdjson::error_code e1 = parser.parse(reinterpret_cast<const uint8_t*>(one.data()), n, false).get(ignored);
        if (e1)
          throw Error("trace '" + path + "': not valid JSON (" + simdjson::error_message(e1) + ") in traceEvents[" +
                      std::to_string(first + k) + "], which starts at byte " + std::to_string(base + starts[k] - 1) + where);
      }
      throw Error("trace '" + path + "': not valid JSON (" + simdjson::error_message(err) + ") in traceEvents[" +
                  std::to_string(first) + "...], at bytes " + std::to_string(base) + "-" + std::to_string(base + len - 2) + where);
    }
    uint64_t index = first;
    for (dom::element e : dom::array(doc)) sink.add(e, index++);
  };
  Splitter split(path, on_batch);
  {
    std::vector<char> buf(src.mapped() ? 0 : size_t(4) << 20);
    for (std::string_view piece; !(piece = src.next(buf)).empty();) split.feed(piece.data(), piece.size());
  }
  const bool gz_name = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  const std::string gz_hint = gz_name && !src.gzip()
      ? "; the name ends in .gz but the file does not start with the gzip magic bytes 1f 8b (check it with gunzip -t)" : "";
  std::string skeleton_text;
  try {
    skeleton_text = split.finish();
  } catch (const Error& e) {
    throw Error(e.what() + std::string(where) + gz_hint);
  }
  json doc;
  try {
    doc = json::parse(skeleton_text);
  } catch (const json::parse_error& e) {
    std::string m = json_error_text(e);
    // Line and column refer to the text without the events: the byte offset below is the file's.
    if (m.rfind("parse error at line ", 0) == 0 && m.find(": ") != std::string::npos) m = m.substr(m.find(": ") + 2);
    if (m.rfind("syntax error while parsing value - ", 0) == 0) m = m.substr(35);
    throw Error("trace '" + path + "': not valid JSON (" + m + ") at byte " +
                std::to_string(split.file_offset(e.byte > 0 ? e.byte - 1 : 0)) + where + gz_hint);
  } catch (const json::exception& e) {
    throw Error("trace '" + path + "': not valid JSON (" + json_error_text(e) + ")" + gz_hint);
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw Error("trace '" + path + "': expected a JSON object with a \"traceEvents\" array");

  if (doc.contains("baseTimeNanoseconds") && !doc["baseTimeNanoseconds"].is_null()) {
    const json& b = doc["baseTimeNanoseconds"];
    if (!b.is_number() || !std::isfinite(b.get<double>()) || b.get<double>() < 0 || b.get<double>() > double(kMaxBaseNs))
      throw Error("trace '" + path + "': baseTimeNanoseconds: expected a number of nanoseconds in [0, 4e18], got " +
                  json_excerpt(b, 40));
    t.base_time_ns = as_int(b);
  }
  const int64_t base = t.base_time_ns;
  if (base) {
    for (Activity& a : t.activities) a.start_ns += base, a.end_ns += base;
    for (Range& r : t.ranges) r.start_ns += base, r.end_ns += base;
  }

  if (doc.contains("deviceProperties") && doc["deviceProperties"].is_array()) {
    for (const json& d : doc["deviceProperties"]) {
      DeviceProperties p;
      p.id = arg<int>(d, "id", 0);
      p.name = arg<std::string>(d, "name", "");
      p.total_global_mem = arg<uint64_t>(d, "totalGlobalMem", 0);
      p.compute_major = arg<int>(d, "computeMajor", 0);
      p.compute_minor = arg<int>(d, "computeMinor", 0);
      p.num_sms = arg<int>(d, "numSms", 0);
      p.max_threads_per_block = arg<int>(d, "maxThreadsPerBlock", 0);
      p.max_threads_per_multiprocessor = arg<int>(d, "maxThreadsPerMultiprocessor", 0);
      p.warp_size = arg<int>(d, "warpSize", 32);
      p.shared_mem_per_block = arg<uint64_t>(d, "sharedMemPerBlock", 0);
      p.shared_mem_per_multiprocessor = arg<uint64_t>(d, "sharedMemPerMultiprocessor", 0);
      p.regs_per_block = arg<int>(d, "regsPerBlock", 0);
      p.regs_per_multiprocessor = arg<int>(d, "regsPerMultiprocessor", 0);
      t.devices.push_back(p);
    }
  }
  // Our own block: wrong types are a corrupt trace, not defaults (bad-input attack, session 31: "glm5prof": "x" and
  // "complete": "yes" were read as a complete trace without the block).
  if (doc.contains("glm5prof") && !doc["glm5prof"].is_null() && !doc["glm5prof"].is_object())
    throw Error("trace '" + path + "': field 'glm5prof' must be an object, got " + doc["glm5prof"].type_name());
  if (doc.contains("glm5prof") && doc["glm5prof"].is_object()) {
    const json& g = doc["glm5prof"];
    if (g.contains("complete") && !g["complete"].is_boolean())
      throw Error("trace '" + path + "': field 'glm5prof.complete' must be true or false, got " + g["complete"].dump());
    t.complete = g.contains("complete") ? g["complete"].get<bool>() : true;
    for (const char* key : {"records_dropped", "kernels_launched", "kernels_recorded"})  // counts decide completeness
      if (g.contains(key) && !g[key].is_number_unsigned())
        throw Error("trace '" + path + "': field 'glm5prof." + key + "' must be a non-negative integer, got " +
                    json_excerpt(g[key]));
    t.records_dropped = arg<uint64_t>(g, "records_dropped", 0);
    t.kernels_launched = arg<uint64_t>(g, "kernels_launched", 0);
    t.kernels_recorded = arg<uint64_t>(g, "kernels_recorded", 0);
    if (g.contains("messages") && g["messages"].is_array())
      for (const json& m : g["messages"]) if (m.is_string()) t.messages.push_back(m.get<std::string>());
    // The recording run's roofline ceilings (Timeline::copy_gbps / bf16_tflops): positive finite numbers if present.
    if (g.contains("peaks") && !g["peaks"].is_null()) {
      const json& pk = g["peaks"];
      if (!pk.is_object()) throw Error("trace '" + path + "': field 'glm5prof.peaks' must be an object, got " + json_excerpt(pk));
      const auto ceiling = [&](const char* key, double limit) {
        if (!pk.contains(key)) return 0.0;
        const json& v = pk[key];
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > limit)
          throw Error("trace '" + path + "': field 'glm5prof.peaks." + key + "' must be a number from 0 to " +
                      std::to_string(int64_t(limit)) + ", got " + json_excerpt(v));
        return v.get<double>();
      };
      t.copy_gbps = ceiling("copy_gbps", 1e6);      // GB/s: far above any device memory
      t.bf16_tflops = ceiling("bf16_tflops", 1e6);  // TFLOP/s
    }
    // Run windows (a trace of several runs; RunWindow): name, start_us / end_us from the base, as events' ts.
    if (g.contains("runs") && !g["runs"].is_null()) {
      const std::string where = "trace '" + path + "': glm5prof.runs";
      if (!g["runs"].is_array()) throw Error(where + ": expected a list of {name, start_us, end_us}");
      for (const json& w : g["runs"]) {
        const auto num = [&](const char* key) {
          if (!w.is_object() || !w.contains(key) || !w[key].is_number() || !std::isfinite(w[key].get<double>()) ||
              std::fabs(w[key].get<double>()) > kMaxTsUs)
            throw Error(where + ": each entry needs a finite number '" + key + "' of microseconds");
          return base + std::llround(w[key].get<double>() * 1e3);
        };
        if (!w.is_object() || !w.contains("name") || !w["name"].is_string())
          throw Error(where + ": each entry needs a string 'name'");
        RunWindow rw{w["name"].get<std::string>(), num("start_us"), num("end_us")};
        if (rw.end_ns < rw.start_ns) throw Error(where + ": run '" + rw.name + "' ends before it starts");
        // Runs are told apart by name (diff matches them so) and own their kernels by time: a repeated name or
        // windows that overlap is a corrupt trace (bad-input attack, session 31: analyze reported two runs 'cast').
        for (const RunWindow& seen : t.runs) {
          if (seen.name == rw.name) throw Error(where + ": run name '" + rw.name + "' is used twice");
          if (rw.start_ns < seen.end_ns && seen.start_ns < rw.end_ns)
            throw Error(where + ": the windows of runs '" + seen.name + "' and '" + rw.name + "' overlap");
        }
        t.runs.push_back(std::move(rw));
      }
    }
  }

  assign_range_nesting(t.ranges);

  // Attribution of device work that carries none of our args: through the launch call (correlation
  // id) to the innermost cpu_op (-> op), the enclosing step range (-> step) and the innermost range that
  // names or sits inside a layer (-> layer: "layer.N", "model.layers.N...", a with_modules layer span;
  // parse_layer_name) on the launching thread. Work with our `op` arg keeps its own step and layer.
  std::unordered_map<uint64_t, const Activity*> launch_of;
  for (const Activity& a : t.activities)
    if ((a.kind == ActivityKind::runtime || a.kind == ActivityKind::driver) && a.correlation_id)
      launch_of[a.correlation_id] = &a;
  std::map<int64_t, std::vector<Interval>> ops_by_thread, steps_by_thread, layers_by_thread;
  for (size_t i = 0; i < t.activities.size(); ++i)
    if (t.activities[i].kind == ActivityKind::cpu_op)
      ops_by_thread[t.activities[i].thread].push_back({t.activities[i].start_ns, t.activities[i].end_ns, i});
  // One torch.profiler step range per step number and thread: two ranges named ProfilerStep#5 would be read as one
  // step spanning both (bad-input attack, session 31: a 3x step time, no warning). (Our own traces repeat step.N
  // once per run, told apart by the run windows.)
  std::set<std::pair<int64_t, int>> step_seen;  // (thread, step number)
  for (size_t i = 0; i < t.ranges.size(); ++i)
    if (t.ranges[i].kind == RangeKind::user_annotation && parse_step_name(t.ranges[i].name) >= 0) {
      const Range& r = t.ranges[i];
      const bool fresh = step_seen.emplace(r.thread, parse_step_name(r.name)).second;
      if (!fresh && r.name.rfind("ProfilerStep#", 0) == 0)
        throw Error("trace '" + path + "': step range '" + r.name + "' appears twice on thread " +
                    std::to_string(r.thread) + " (steps must be distinct ranges)");
      steps_by_thread[r.thread].push_back({r.start_ns, r.end_ns, i});
    }
  // Layers: only ranges whose own name is a layer (not ones that inherited it by nesting, e.g. a ProfilerStep that
  // began inside a layer span), and the OUTERMOST of them: with_modules numbers each class on its own, so a
  // "Qwen2MoeSparseMoeBlock_0" inside "Qwen2MoeDecoderLayer_3" must not move its kernels to layer 0.
  for (size_t i = 0; i < t.ranges.size(); ++i)
    if (t.ranges[i].kind == RangeKind::user_annotation && parse_layer_name(t.ranges[i].name) >= 0)
      layers_by_thread[t.ranges[i].thread].push_back({t.ranges[i].start_ns, t.ranges[i].end_ns, i});
  std::map<int64_t, std::vector<size_t>> pending;  // launching thread -> device activity indices
  for (size_t i = 0; i < t.activities.size(); ++i) {
    const Activity& a = t.activities[i];
    if (a.device < 0 || !a.op.empty()) continue;
    auto it = launch_of.find(a.correlation_id);
    if (it != launch_of.end()) pending[it->second->thread].push_back(i);
  }
  for (const auto& [thread, indices] : pending) {
    std::vector<int64_t> when;
    for (size_t i : indices) when.push_back(launch_of[t.activities[i].correlation_id]->start_ns);
    const std::vector<size_t> op = innermost(ops_by_thread[thread], when);
    const std::vector<size_t> step = innermost(steps_by_thread[thread], when);
    const std::vector<size_t> layer = innermost(layers_by_thread[thread], when, /*outermost=*/true);
    for (size_t k = 0; k < indices.size(); ++k) {
      Activity& a = t.activities[indices[k]];
      if (op[k] != SIZE_MAX) {
        a.op = t.activities[op[k]].name;
        if (!a.external_id) a.external_id = t.activities[op[k]].external_id;
      }
      if (step[k] != SIZE_MAX && a.step < 0) a.step = parse_step_name(t.ranges[step[k]].name);
      if (layer[k] != SIZE_MAX && a.layer < 0) a.layer = parse_layer_name(t.ranges[layer[k]].name);
    }
  }
  // Op table from our own args.
  for (const Activity& a : t.activities)
    if (a.device >= 0 || a.kind == ActivityKind::kernel)
      if (a.external_id && (a.bytes || a.flops || a.layer >= 0) && !a.op.empty())
        t.ops.try_emplace(a.external_id, OpDesc{a.step, a.layer, a.op, a.bytes, a.flops});
  // The kernels the file holds are the ones recorded; metadata that claims more means events were lost on the
  // way (a file cut short and re-closed, an edited trace): the trace is incomplete and says so.
  const uint64_t in_file = count_kernels(t);
  if (t.kernels_recorded > in_file) {
    t.complete = false;
    t.messages.push_back("the file holds " + std::to_string(in_file) + " kernel events, its metadata says " +
                         std::to_string(t.kernels_recorded) + " were recorded");
  }
  t.kernels_recorded = in_file;
  // A torch.profiler trace recorded without ProfilerActivity.CUDA holds only host events: say so, rather than
  // leave an empty report that reads like an idle GPU.
  if (t.kernels_recorded == 0) {
    const auto host = std::count_if(t.activities.begin(), t.activities.end(), [](const Activity& a) {
      return a.kind == ActivityKind::cpu_op || a.kind == ActivityKind::runtime || a.kind == ActivityKind::driver;
    });
    if (host > 0)
      t.messages.push_back("no GPU kernel events, only " + std::to_string(host) +
                           " host events (CPU ops, runtime / driver calls): record the GPU side too (torch.profiler: "
                           "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])");
  }
  sort_timeline(t);
  return t;
}

}  // namespace glm5
