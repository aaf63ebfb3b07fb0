#include "output_forwarder.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

namespace hoop::run {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    return false;
  }
  return true;
}

LineForwarder::LineForwarder(int out_fd, std::string prefix)
    : out_fd_(out_fd), prefix_(std::move(prefix)) {}

void LineForwarder::append_line(std::string& out, std::string_view line) const {
  out += prefix_;
  out += line;
  out += '\n';
}

void LineForwarder::feed(std::string_view data) {
  std::string out;
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(data);
      break;
    }
    if (partial_.empty()) {
      append_line(out, data.substr(0, newline));
    } else {
      partial_.append(data.substr(0, newline));
      append_line(out, partial_);
      partial_.clear();
    }
    data.remove_prefix(newline + 1);
  }
  while (partial_.size() >= kMaxLine) {
    append_line(out, std::string_view(partial_).substr(0, kMaxLine));
    partial_.erase(0, kMaxLine);
  }
  if (!out.empty()) write_all(out_fd_, out);
}

void LineForwarder::flush() {
  if (partial_.empty()) return;
  std::string out;
  append_line(out, partial_);
  partial_.clear();
  write_all(out_fd_, out);
}

}  // namespace hoop::run
