// Socket settings shared by the listener and both ends of a link.
#pragma once

#include <cstddef>

namespace hoop::transport::tcp {

// HOOP_SOCKET_BUFFER (e.g. "8M") or 4 MiB.
size_t socket_buffer_bytes();
// SO_SNDBUF and SO_RCVBUF (best effort: the kernel caps them at net.core.[rw]mem_max). Set on
// the listener too, since accepted sockets inherit them and the TCP window scale is fixed at
// connection set-up.
void set_buffer_sizes(int fd, size_t bytes) noexcept;
// A connected link socket: O_NONBLOCK, TCP_NODELAY, SO_KEEPALIVE and the buffer sizes.
// Throws Error{transport} when the socket refuses.
void configure_link_socket(int fd);

}  // namespace hoop::transport::tcp
