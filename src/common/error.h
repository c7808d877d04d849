// Errors: one exception type, one CUDA check macro. The CLI turns any glm5::Error into one line on
// stderr and a non-zero exit; nothing below main() prints and exits on its own.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace glm5 {

// Every failure the user can cause or the system can report. `what()` is the whole message: it names
// the file / field / value and what was expected, so the CLI prints it as it is.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bad usage: an option out of range, or options that contradict (README: the CLI exits 2 for these, 1 for a
// failed run). Thrown by the checks of the options themselves, before any work.
struct UsageError : Error {
  using Error::Error;
};

// An output could not be written (trace/atomic_file.h: a folder missing or not writable, a full disk, a target that
// cannot be replaced, an output naming an input). Never a property of one sweep point: compare stops on it instead of
// recording the point as skipped (bad-input review, session 31: a full disk gave exit 0 with every point "skipped").
struct OutputError : Error {
  using Error::Error;
};

// Throws glm5::Error(message) unless `condition` holds. Use for host-side preconditions.
inline void require(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}
// Throws glm5::UsageError(message) unless `condition` holds: for the validation of command-line options.
inline void require_usage(bool condition, const std::string& message) {
  if (!condition) throw UsageError(message);
}

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);

}  // namespace glm5

// CUDA_CHECK(expr): throws glm5::Error naming the expression, file:line, the error's name and string.
#define CUDA_CHECK(expr)                                                           \
  do {                                                                             \
    cudaError_t glm5_err_ = (expr);                                                \
    if (glm5_err_ != cudaSuccess) ::glm5::throw_cuda_error(glm5_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// CUDA_CHECK_LAUNCH(): after every kernel launch, reports a bad launch configuration at its site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
