// hoop-run: starts the N local ranks of a job and supervises them (see job.h).
#include <fcntl.h>
#include <unistd.h>

#include <exception>

#include <fmt/format.h>

#include "hoop/error.h"
#include "job.h"
#include "options.h"
#include "output_forwarder.h"

int main(int argc, char** argv) {
  // With stdin, stdout or stderr closed, the pipes and /dev/null opened for the ranks could
  // take those numbers and be lost in the child's dup2 dance: give them /dev/null first.
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
  }
  auto parsed = hoop::run::parse_run_options(argc, argv);
  if (!parsed.options) return parsed.exit_code;
  try {
    return hoop::run::run_job(*parsed.options);
  } catch (const hoop::Error& e) {
    hoop::run::write_all(STDERR_FILENO, fmt::format("hoop-run: {}\n", e.detail()));
    return 1;
  } catch (const std::exception& e) {
    hoop::run::write_all(STDERR_FILENO, fmt::format("hoop-run: {}\n", e.what()));
    return 1;
  }
}
