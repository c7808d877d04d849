#include "common/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

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

}  // namespace glm5
