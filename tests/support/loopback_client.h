// A foreign client on loopback, for tests that throw bytes at a rank's or the store's port.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hoop::test {

// Connects to 127.0.0.1:port within 500 ms (a listener whose backlog is full would block a
// plain connect for minutes); returns a blocking descriptor, or -1.
int connect_loopback(uint16_t port);

// Sends all of data; stops quietly when the other side hangs up.
void send_all(int fd, const void* data, size_t n);

}  // namespace hoop::test
