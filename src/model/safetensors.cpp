#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/error.h"
#include "common/json_excerpt.h"

namespace glm5 {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MB: far above any real header


}  // namespace

int64_t SafetensorsView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool parse_safetensors_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::F32},         {"BF16", DType::BF16}, {"F16", DType::F16},
      {"F8_E4M3", DType::F8_E4M3}, {"I32", DType::I32},   {"I64", DType::I64}};
  for (const auto& [name, t] : table) {
    if (s == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

float read_element_as_float(DType dtype, const uint8_t* data, int64_t i) {
  switch (dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      return f;
    }
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, data + 2 * i, 2);
      return bf16_bits_to_float(b);
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      return f16_bits_to_float(h);
    }
    case DType::F8_E4M3: return e4m3_bits_to_float(data[i]);
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, data + 4 * i, 4);
      return float(v);
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, data + 8 * i, 8);
      return float(v);
    }
  }
  return 0.f;
}

SafetensorsFile::~SafetensorsFile() { close(); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      views_(std::move(o.views_)),
      metadata_(std::move(o.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    views_ = std::move(o.views_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

void SafetensorsFile::close() {
  if (map_) munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  views_.clear();
  metadata_.clear();
}

void SafetensorsFile::open(const std::string& path) {
  close();
  path_ = path;
  const std::string& P = path;

  // O_NONBLOCK: a FIFO opens at once (and fstat then rejects it) instead of waiting for a writer forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(P + ": cannot open safetensors file (" + std::strerror(errno) + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(P + ": not a regular file");
  }
  const uint64_t file_bytes = uint64_t(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    throw Error(P + ": truncated safetensors file: " + std::to_string(file_bytes) +
                " bytes, expected at least 8 (the header length)");
  }
  void* m = mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  int mmap_errno = errno;
  ::close(fd);
  if (m == MAP_FAILED) throw Error(P + ": mmap failed (" + std::strerror(mmap_errno) + ")");
  map_ = m;
  map_bytes_ = file_bytes;
  const uint8_t* base = static_cast<const uint8_t*>(m);

  try {
    uint64_t header_len = 0;
    for (int b = 7; b >= 0; --b) header_len = (header_len << 8) | base[b];  // little-endian
    if (header_len > kMaxHeaderBytes)
      throw Error(P + ": safetensors header length " + std::to_string(header_len) +
                  " bytes is not sane (limit 100 MB); is this a safetensors file?");
    if (8 + header_len > file_bytes)
      throw Error(P + ": safetensors header length " + std::to_string(header_len) + " runs past the end of the file (" +
                  std::to_string(file_bytes) + " bytes)");
    const char* hbegin = reinterpret_cast<const char*>(base + 8);
    nlohmann::json header;
    // A tensor name listed twice: nlohmann keeps the last silently (then "missing tensor 'x'" named another
    // tensor); the parser callback sees every top-level key (bad-input review, session 16).
    std::set<std::string> names;
    std::string twice;
    auto keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      if (event == nlohmann::json::parse_event_t::key && depth == 1 && twice.empty() &&
          !names.insert(parsed.get<std::string>()).second)
        twice = parsed.get<std::string>();
      return true;
    };
    try {
      header = nlohmann::json::parse(hbegin, hbegin + header_len, keys);
    } catch (const nlohmann::json::exception& e) {
      throw Error(P + ": safetensors header is not valid JSON (" + json_error_text(e) + ")");
    }
    if (!twice.empty()) throw Error(P + ": tensor '" + twice + "' is listed twice in the safetensors header");
    if (!header.is_object())
      throw Error(P + ": safetensors header must be a JSON object, got " + std::string(header.type_name()));

    const uint64_t data_start = 8 + header_len;
    const uint64_t data_bytes = file_bytes - data_start;
    struct Range {
      uint64_t begin, end;
      const std::string* name;
    };
    std::vector<Range> ranges;
    ranges.reserve(header.size());

    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const nlohmann::json& e = it.value();
      if (name == "__metadata__") {
        if (e.is_object()) {
          for (auto m2 = e.begin(); m2 != e.end(); ++m2)
            if (m2.value().is_string()) metadata_[m2.key()] = m2.value().get<std::string>();
        }
        continue;
      }
      const std::string where = P + ": tensor '" + name + "'";
      if (!e.is_object()) throw Error(where + ": header entry must be an object, got " + json_excerpt(e));
      auto dt = e.find("dtype");
      if (dt == e.end() || !dt->is_string())
        throw Error(where + ": 'dtype' must be a string, got " + (dt == e.end() ? "nothing" : json_excerpt(*dt)));
      DType dtype;
      if (!parse_safetensors_dtype(dt->get<std::string>(), &dtype))
        throw Error(where + ": unsupported dtype \"" + dt->get<std::string>() +
                    "\" (supported: BF16, F16, F32, F8_E4M3, I32, I64)");
      auto sh = e.find("shape");
      if (sh == e.end() || !sh->is_array())
        throw Error(where + ": 'shape' must be an array of non-negative integers, got " +
                    (sh == e.end() ? "nothing" : json_excerpt(*sh)));
      std::vector<int64_t> shape;
      uint64_t numel = 1;
      bool overflow = false;
      for (const auto& d : *sh) {
        if (!d.is_number_unsigned())
          throw Error(where + ": 'shape' must be an array of non-negative integers, got " + json_excerpt(*sh));
        uint64_t v = d.get<uint64_t>();
        if (v > (1ull << 48)) overflow = true;
        shape.push_back(int64_t(v));
        if (v != 0 && numel > (1ull << 62) / v) overflow = true;
        numel *= v;
      }
      if (overflow) throw Error(where + ": shape " + json_excerpt(*sh) + " is too large");
      auto off = e.find("data_offsets");
      if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
          !(*off)[1].is_number_unsigned())
        throw Error(where + ": 'data_offsets' must be two non-negative integers [begin, end], got " +
                    (off == e.end() ? "nothing" : json_excerpt(*off)));
      uint64_t b = (*off)[0].get<uint64_t>(), en = (*off)[1].get<uint64_t>();
      if (b > en)
        throw Error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] have begin > end");
      if (en > data_bytes)
        throw Error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                    "] run past the data section (" + std::to_string(data_bytes) + " bytes; file truncated?)");
      uint64_t want = numel * uint64_t(dtype_size(dtype));
      if (en - b != want)
        throw Error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] hold " +
                    std::to_string(en - b) + " bytes, but " + dt->get<std::string>() + " shape " + json_excerpt(*sh) +
                    " needs " + std::to_string(want));
      SafetensorsView v;
      v.name = name;
      v.dtype = dtype;
      v.shape = std::move(shape);
      v.data = base + data_start + b;
      v.nbytes = size_t(want);
      auto [pos, inserted] = views_.emplace(name, std::move(v));
      ranges.push_back({b, en, &pos->first});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& x, const Range& y) {
      return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
    });
    const Range* widest = nullptr;  // the range with the largest end so far
    for (const Range& c : ranges) {
      if (c.end == c.begin) continue;  // empty tensors occupy no bytes
      if (widest && c.begin < widest->end)
        throw Error(P + ": tensor '" + *c.name + "' data [" + std::to_string(c.begin) + ", " + std::to_string(c.end) +
                    ") overlaps tensor '" + *widest->name + "' [" + std::to_string(widest->begin) + ", " +
                    std::to_string(widest->end) + ")");
      if (!widest || c.end > widest->end) widest = &c;
    }
  } catch (...) {
    close();
    throw;
  }
}

std::vector<std::string> SafetensorsFile::tensors() const {
  std::vector<std::string> names;
  names.reserve(views_.size());
  for (const auto& kv : views_) names.push_back(kv.first);
  return names;
}

const SafetensorsView& SafetensorsFile::get(const std::string& name) const {
  auto it = views_.find(name);
  if (it == views_.end()) throw Error(path_ + ": no tensor '" + name + "'");
  return it->second;
}

}  // namespace glm5
