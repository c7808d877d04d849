// CPU twin of moe_gate.h: the three ops it fuses, one after the other, and the parameter checks both twins share.
#include <string>

#include "common/error.h"
#include "kernels/moe_gate.h"

namespace glm5 {

void validate_moe_gate_params(const MoeGateParams& p, const char* op) {
  const std::string where = std::string(op) + ": MoeGateParams.";
  validate_norm_params(p.norm, op);
  validate_linear_params(p.router, op, true);
  validate_moe_route_params(p.route, op);
  require(p.router.x == p.norm.y, where + "router.x must be norm.y (the router reads the normalized rows)");
  require(p.route.logits == p.router.y, where + "route.logits must be router.y (the routing reads the router's output)");
  require(p.norm.rows == p.router.m && p.router.m == p.route.B,
          where + "norm.rows = " + std::to_string(p.norm.rows) + ", router.m = " + std::to_string(p.router.m) +
              ", route.B = " + std::to_string(p.route.B) + ": expected one batch size");
  require(p.norm.dim == p.router.k, where + "norm.dim = " + std::to_string(p.norm.dim) + ", router.k = " +
                                        std::to_string(p.router.k) + ": expected the hidden size twice");
  require(p.norm.y_stride == p.norm.dim,
          where + "norm.y_stride = " + std::to_string(p.norm.y_stride) + ", expected dim = " +
              std::to_string(p.norm.dim) + " (the router reads rows k apart)");
  require(p.router.n == p.route.E, where + "router.n = " + std::to_string(p.router.n) + ", route.E = " +
                                       std::to_string(p.route.E) + ": expected the expert count twice");
  require(!p.router.accumulate, where + "router.accumulate must be false (the logits are written, not added to)");
}

void moe_gate_cpu(const MoeGateParams& p) {
  validate_moe_gate_params(p, "moe_gate_cpu");
  rmsnorm_cpu(p.norm);
  linear_cpu(p.router);
  moe_route_cpu(p.route);
}

}  // namespace glm5
