// The Python module hoop_torch._C: the creator torch.distributed calls for backend "hoop".
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_hoop.h"
#include "shared_allocator.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "hoop collectives as a torch.distributed backend";
  // torch.distributed.Backend.register_backend's creator: (store, rank, size, timeout).
  // The rendezvous blocks on the store, so the GIL is released meanwhile.
  m.def("create_process_group", &hoop_torch::create_process_group, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>());
  m.def(
      "_drain_all",
      [](double seconds) {
        hoop_torch::drain_all_process_groups(
            std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
      },
      py::arg("seconds"),
      "Waits (at most `seconds` per group) until every hoop group has finished and released "
      "the works issued so far; hoop_torch runs it at interpreter exit.");
  m.def(
      "_install_shared_allocator",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& group, size_t min_bytes) {
        auto* hoop_group = dynamic_cast<hoop_torch::ProcessGroupHoop*>(group.get());
        if (hoop_group == nullptr) {
          throw std::invalid_argument("shared_memory_allocations: the group is not a hoop group");
        }
        hoop_torch::install_shared_allocator(hoop_group->shared_communicator(), min_bytes);
      },
      py::arg("group"), py::arg("min_bytes"));
  m.def("_remove_shared_allocator", &hoop_torch::remove_shared_allocator);
  m.def("in_shared_allocation", &hoop_torch::in_shared_allocation, py::arg("tensor"),
        "Whether the tensor's storage came from hoop_torch.shared_memory_allocations().");
}
