// Input files from the user: one check shared by every reader (traces, reports, configs, prompt ids). No CUDA:
// the fuzz targets (tools/fuzz.sh) link it without the CUDA runtime.
#pragma once
#include <string>

namespace glm5 {

// Throws glm5::Error unless `path` names an existing regular file (not a folder, FIFO or device: /dev/zero
// or a pipe with no writer would make a reader run out of memory or wait forever). `what` is what the caller
// expected there ("a trace", "a diff config"), for the message "'PATH': not a regular file (WHAT expected)".
void require_regular_file(const std::string& path, const std::string& what);

// Throws glm5::Error unless `weights` (a --weights argument other than "synthetic") names an existing folder:
// "--weights 'PATH': no such checkpoint folder (...)" or "...: not a folder (...)" (a .safetensors file given there
// was read as config.json). profile and decode check it before reading the config.
void require_checkpoint_folder(const std::string& weights);

}  // namespace glm5
