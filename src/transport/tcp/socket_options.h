// Socket settings shared by the listener and both ends of a link.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hoop::transport::tcp {

// HOOP_SOCKET_BUFFER (e.g. "8M") or 4 MiB.
size_t socket_buffer_bytes();
// SO_SNDBUF and SO_RCVBUF (best effort: the kernel caps them at net.core.[rw]mem_max). Set on
// the listener too, since accepted sockets inherit them and the TCP window scale is fixed at
// connection set-up.
void set_buffer_sizes(int fd, size_t bytes) noexcept;
// A connected link socket: O_NONBLOCK, TCP_NODELAY, SO_KEEPALIVE, the buffer sizes (under the
// cap below) and the congestion control. Throws Error{transport} when
// the socket refuses.
void configure_link_socket(int fd);
// HOOP_TCP_CONGESTION on fd: unset, cubic where the kernel lets this process choose it;
// `system` keeps the system's; a name the kernel refuses is reported once and changes nothing.
void set_congestion_control(int fd);

// A cap on both buffers of the links of this process (0: none), for a link shaped to a rate
// with a deep queue in front of it. The receive side: a window of megabytes lets each
// connection fill that queue, and the acknowledgements of the other direction then wait behind
// it (a ring over such links lost 15% of the rate). The send side: a sender that may queue
// megabytes runs calls ahead of the link, and a chain across it (Broadcast, Reduce) left the
// link idle a quarter of the time. Links made after the call get it at once; links already
// open take it at their next send or receive (`buffer_cap_generation` tells them it changed).
void cap_link_buffers(size_t bytes) noexcept;
uint32_t buffer_cap_generation() noexcept;
// SO_SNDBUF and SO_RCVBUF of fd set again to HOOP_SOCKET_BUFFER under the cap (nothing when
// neither is set).
void apply_buffer_cap(int fd) noexcept;

}  // namespace hoop::transport::tcp
