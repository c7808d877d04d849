// Built-in config.json texts: "glm5" (configs/glm5.json), "glm5-tiny" (the golden checkpoint's
// config.json), "deepseek-v3" (configs/deepseek-v3.json) and "deepseek-v32" (DeepSeek-V3.2-Exp),
// embedded in the binary.
#pragma once
#include <string>
#include <vector>

namespace glm5 {

// The config.json text of built-in model `name`, or nullptr when there is none.
const char* builtin_config_json(const std::string& name);
// "glm5, glm5-tiny, deepseek-v3, deepseek-v32" (for error messages).
std::string builtin_config_names();
std::vector<std::string> builtin_config_list();

}  // namespace glm5
