#include "common/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace glm5 {

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw Error("'" + path + "' cannot be read: " + std::strerror(errno) + " (" + what + " expected)");
  if (S_ISDIR(st.st_mode)) throw Error("'" + path + "' is a directory (" + what + " expected)");
  if (!S_ISREG(st.st_mode))
    throw Error("'" + path + "': not a regular file (a pipe or device; " + what + " expected: save it to a file first)");
}

void require_checkpoint_folder(const std::string& weights) {
  std::error_code ec;
  if (!std::filesystem::exists(weights, ec))
    throw Error("--weights '" + weights + "': no such checkpoint folder (expected 'synthetic' or a folder with config.json)");
  if (!std::filesystem::is_directory(weights, ec))
    throw Error("--weights '" + weights + "': not a folder (expected 'synthetic' or a checkpoint folder with config.json)");
}

}  // namespace glm5
