// Placeholder until the perf part lands; replaced by its owner.
#include "bindings.h"
namespace nvmelab {
void bind_perf(pybind11::module_ &) {}
}  // namespace nvmelab
