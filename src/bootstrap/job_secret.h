// The per-job secret that every TCP handshake of hoop carries (HOOP_SECRET): hoop-run draws one
// for each job it starts and hands it to its ranks through their environment.
#pragma once

#include <cstdint>
#include <string>

namespace hoop::bootstrap {

// 128 bits from the kernel's random source (getrandom), as 32 hex digits. Throws
// hoop::Error{internal} when the kernel cannot provide them.
std::string random_job_secret();

// The key of this process's HOOP_SECRET (FNV-1a, as the TCP handshake carries it); 0 without
// a secret.
uint64_t job_secret_key();

}  // namespace hoop::bootstrap
