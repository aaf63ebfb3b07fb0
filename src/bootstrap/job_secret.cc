#include "bootstrap/job_secret.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "core/errors.h"
#include "core/hash.h"
#include "core/params.h"

namespace hoop::bootstrap {

std::string random_job_secret() {
  std::array<uint8_t, 16> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_system_error(ErrorCode::internal, "getrandom for the job's secret", errno);
    }
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (uint8_t b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

uint64_t job_secret_key() {
  const auto secret = params::text(params::Id::secret);
  return secret ? fnv1a64(*secret) : 0;
}

}  // namespace hoop::bootstrap
