#include "profiler/host_clock_tracer.h"

namespace glm5 {

HostClockTracer::HostClockTracer() { timeline_.source = "host-clock"; }
void HostClockTracer::begin_range(const std::string& name) { (void)name; }
void HostClockTracer::end_range() {}
void HostClockTracer::begin_op(const OpDesc& op) { (void)op; }
void HostClockTracer::end_op() {}
Timeline HostClockTracer::finish() { return timeline_; }
int64_t HostClockTracer::now_ns() const { return 0; }
void HostClockTracer::close(Open o, int64_t end_ns) { (void)o; (void)end_ns; }

}  // namespace glm5
