#include "profiler/cupti_records.h"

namespace glm5 {

Timeline build_timeline_from_records(const ActivityRecords& records,
                                     const std::map<uint64_t, OpDesc>& ops) {
  (void)records;
  Timeline t;
  t.source = "cupti";
  t.ops = ops;
  return t;
}
std::string demangle(const std::string& name) { return name; }

}  // namespace glm5
