// Where the tests find ../shared (golden checkpoint, configs, external traces): $GLM5_SHARED_DIR when
// set (the GPU machine gets a copy inside the tree), else the folder CMake saw beside the checkout.
#pragma once
#include <cstdlib>
#include <string>

namespace glm5::test {

inline std::string shared_dir() {
  const char* env = std::getenv("GLM5_SHARED_DIR");
  return env && *env ? env : GLM5_SHARED_DIR;
}

inline std::string golden_dir() { return shared_dir() + "/golden/glm5-tiny"; }

}  // namespace glm5::test
