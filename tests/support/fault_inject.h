// Faults a rank injects into itself, from a thread, while its main thread runs collectives.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hoop::test {

enum class Fault {
  kill,   // SIGKILL: the process vanishes
  stop,   // SIGSTOP: the process hangs (alive, silent)
  reset,  // every TCP link of the rank is reset (RST) under its feet
  close,  // every TCP link of the rank is shut down (FIN) mid-message
};

const char* fault_name(Fault f);

// After `delay`, injects `fault` into this process. The TCP faults act on the connected TCP
// sockets of the process except those to `store_port` (the rendezvous store). Returns at once.
void inject_fault_later(Fault fault, std::chrono::microseconds delay, uint16_t store_port);

// The TCP sockets of this process connected to a peer port other than `skip_port`.
int connected_tcp_sockets(uint16_t skip_port, int* fds, int max_fds);

}  // namespace hoop::test
