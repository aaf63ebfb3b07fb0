// The Python module hoop_torch._C: the creator torch.distributed calls for backend "hoop".
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_hoop.h"

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
}
