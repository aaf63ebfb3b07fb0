// The process's limit on open files (RLIMIT_NOFILE), where a rank runs out of descriptors: a
// rank holds a socket per TCP peer it talks to (per channel), and pairwise algorithms talk to
// every peer, so a job of a thousand ranks passes the usual soft limit of 1024. The soft
// limit stays as the process set it (1024 keeps select() working for code that uses it) until
// hoop's links come near it; then it is raised to the hard limit, once. Links never take the
// last kLeftFree descriptors: those stay for the rest of the process (its files, the report of
// a failure, UBSan's checks, which probe memory through a pipe).
#pragma once

#include <string>

namespace hoop {

inline constexpr int kLeftFree = 16;

// Raises the soft limit to the hard limit, once per process. True when the limit was below
// the hard limit and now is not; false when it already was at the hard limit or cannot be
// raised.
bool raise_open_file_limit();

// A descriptor just made for a link (a socket, accepted or to connect): kept when it is below
// the soft limit's last kLeftFree, or once the limit could be raised above that; else closed,
// and -1 with errno EMFILE. -1 stays -1 (errno as it was), but an EMFILE raises the limit when
// it can and the caller may try again (`retry` set).
int keep_link_descriptor(int fd, bool* retry);

// For errno `err` of a call that gives up: where it is EMFILE, " (this process may open N
// files, 16 of them left to other than links: raise `ulimit -n`)"; else "".
std::string out_of_descriptors_note(int err);

}  // namespace hoop
