// The process's limit on open files (RLIMIT_NOFILE), where a rank runs out of descriptors: a
// rank holds a socket per TCP peer it talks to (per channel), and pairwise algorithms talk to
// every peer, so a job of a thousand ranks passes the usual soft limit of 1024. The soft
// limit stays as the process set it (1024 keeps select() working for code that uses it) until
// a call fails for want of a descriptor; then it is raised to the hard limit, once.
#pragma once

#include <string>

namespace hoop {

// After a call failed with EMFILE: raises the soft limit to the hard limit, once per process.
// True when the limit was below the hard limit and now is not (retry the call); false when it
// already was at the hard limit or cannot be raised.
bool raise_open_file_limit();

// For errno `err`: where it is EMFILE, " (this process may open N files: raise `ulimit -n`)",
// else "". Appended to the message of an error that ran out of descriptors.
std::string open_file_limit_hint(int err);

}  // namespace hoop
