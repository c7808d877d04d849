#include "common/buffer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/error.h"

namespace glm5 {

Buffer::Buffer(Where where, size_t bytes, const std::string& label) : bytes_(bytes), where_(where) {
  if (bytes == 0) return;
  if (where == Where::Host) {
    ptr_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    require(ptr_ != nullptr, "out of host memory allocating " + label + " (" + std::to_string(bytes) + " bytes)");
  } else {
    cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error("GPU out of memory allocating " + label + ": " + std::to_string(bytes >> 20) + " MiB asked, " +
                  std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) + " MiB (" +
                  cudaGetErrorString(err) + ")");
    }
  }
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (!ptr_) return;
  if (where_ == Where::Host) std::free(ptr_);
  else cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

Buffer::Buffer(Buffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), where_(o.where_) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    where_ = o.where_;
  }
  return *this;
}

void Buffer::upload(const void* src, size_t n, size_t offset) {
  require(offset + n <= bytes_, "Buffer::upload out of bounds");
  if (n == 0) return;
  if (where_ == Where::Host) std::memcpy(static_cast<char*>(ptr_) + offset, src, n);
  else CUDA_CHECK(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, n, cudaMemcpyHostToDevice));
}

void Buffer::download(void* dst, size_t n, size_t offset) const {
  require(offset + n <= bytes_, "Buffer::download out of bounds");
  if (n == 0) return;
  if (where_ == Where::Host) std::memcpy(dst, static_cast<const char*>(ptr_) + offset, n);
  else CUDA_CHECK(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, n, cudaMemcpyDeviceToHost));
}

bool cuda_available() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

}  // namespace glm5
