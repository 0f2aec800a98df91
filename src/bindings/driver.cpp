// Placeholder until the driver part lands; replaced by its owner.
#include "bindings.h"
namespace nvmelab {
void bind_driver(pybind11::module_ &) {}
}  // namespace nvmelab
