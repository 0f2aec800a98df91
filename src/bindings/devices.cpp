/* SPDX-License-Identifier: BSD-3-Clause */
// nvmelab._native: the driver's PCI in-use check (nvme/inuse.h) for nvmelab.devices.
#include <string>

#include "bindings.h"

extern "C" {
#include "nvme/inuse.h"
}

namespace py = pybind11;

namespace nvmelab {

void bind_devices(py::module_ &m)
{
    m.attr("PCI_INUSE_MAX_BLK") = NVME_INUSE_MAX_BLK;
    m.def(
        "pci_in_use",
        [](const std::string &addr, const std::string &root) {
            char why[4096] = "";
            int rc = nvme_pci_in_use(root.c_str(), addr.c_str(), why, sizeof(why));
            return py::make_tuple(rc, std::string(why));
        },
        py::arg("addr"), py::arg("root") = "",
        "(rc, reasons) of the driver's in-use check for a canonical PCI address: rc 0 free, -EBUSY with the "
        "reasons joined by '; ', -ENODEV absent. root prefixes every /sys, /proc and /dev path.");
    m.def(
        "pci_block_devices",
        [](const std::string &addr, const std::string &root) {
            char list[4096] = "";
            int n = nvme_pci_block_devices(root.c_str(), addr.c_str(), list, sizeof(list));
            py::list out;
            if (n <= 0)
                return out;
            std::string s(list);
            size_t start = 0;
            while (start <= s.size()) {
                size_t comma = s.find(',', start);
                std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
                if (!item.empty())
                    out.append(item);
                if (comma == std::string::npos)
                    break;
                start = comma + 1;
            }
            return out;
        },
        py::arg("addr"), py::arg("root") = "",
        "The function's block devices (namespaces, partitions, stacked devices) as the in-use check sees them.");
}

} // namespace nvmelab
