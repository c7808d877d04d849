#include "common/error.h"

namespace glm5 {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw Error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
              ") in " + expr + " at " + file + ":" + std::to_string(line));
}

}  // namespace glm5
