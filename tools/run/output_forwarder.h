// Forwarding of the ranks' output: each child's stdout and stderr arrive through pipes and are
// written to hoop-run's own stdout and stderr a whole line at a time, so lines of different
// ranks never mix, each prefixed with the rank ("[3] ").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hoop::run {

// Writes all of data to fd (retrying on EINTR and on a non-blocking fd). False when the fd is
// gone (EPIPE, ...): the output is dropped, the job goes on.
bool write_all(int fd, std::string_view data);

class LineForwarder {
 public:
  // A line longer than this is cut and forwarded in pieces, so that a child writing without
  // newlines cannot make hoop-run's memory grow without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  LineForwarder(int out_fd, std::string prefix);

  // Forwards the complete lines of data (with those left from earlier calls) and keeps the
  // unfinished last line for later.
  void feed(std::string_view data);
  // Forwards the unfinished last line, ending it with a newline (at the end of the stream).
  void flush();

 private:
  void append_line(std::string& out, std::string_view line) const;

  int out_fd_;
  std::string prefix_;
  std::string partial_;
};

}  // namespace hoop::run
