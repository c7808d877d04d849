// Memory the engine owns: one RAII type for host or device bytes, so CPU and CUDA backends share
// the engine code (the CPU twin of every op takes host pointers, the CUDA launcher device pointers).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace glm5 {

enum class Where { Host, Device };

// A contiguous allocation of `bytes` bytes on the host (64-byte aligned) or on the current CUDA
// device (cudaMalloc). Move-only. Throws glm5::Error on failure, naming `label` and the size.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Where where, size_t bytes, const std::string& label);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  Where where() const { return where_; }

  // Copies `n` bytes from host memory at `src` into this buffer at byte `offset` (bounds checked).
  void upload(const void* src, size_t n, size_t offset = 0);
  // Copies `n` bytes from byte `offset` of this buffer to host memory at `dst` (bounds checked).
  void download(void* dst, size_t n, size_t offset = 0) const;

 private:
  void release();
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Where where_ = Where::Host;
};

// True when a CUDA device is present and usable (driver loaded, at least one device).
bool cuda_available();

}  // namespace glm5
