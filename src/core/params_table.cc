// The table of hoop's environment variables. To add one: a row here, its Id in params.h (same
// order), its row in the README's table (tests/test_params.cc says what it must be), and read it
// with params::text / integer / bytes / seconds.
#include <array>

#include "core/params.h"

namespace hoop::params {

namespace {

constexpr int64_t kBillion = 1'000'000'000;  // the largest rank or count bootstrap accepts

using K = Kind;

constexpr std::array<Param, static_cast<size_t>(Id::count_)> kParams = {{
    {.id = Id::debug, .name = "HOOP_DEBUG", .kind = K::choice, .fallback = "WARN",
     .doc = "logging to stderr (transport, links, algorithm per op)",
     .choices = "WARN|INFO|TRACE|OFF", .aliases = "NONE|0|1|2|DEBUG", .fold_case = true,
     .on_bad = OnBad::quiet},
    {.id = Id::timeout, .name = "HOOP_TIMEOUT", .kind = K::seconds, .fallback = "300",
     .doc = "stall timeout of every wait; also per communicator and per op"},
    {.id = Id::transport, .name = "HOOP_TRANSPORT", .kind = K::choice, .fallback = "auto",
     .doc = "force a transport (auto: shared memory within a host, TCP between hosts)",
     .choices = "auto|shm|tcp"},
    {.id = Id::algo, .name = "HOOP_ALGO", .kind = K::text, .fallback = "",
     .doc = "force an algorithm, for all collectives (`ring`) or per collective "
            "(`allreduce:ring,broadcast:tree`); unset: the tuner's choice"},
    {.id = Id::nchannels, .name = "HOOP_NCHANNELS", .kind = K::integer, .fallback = "",
     .doc = "spread ring-based collectives over K parallel links per peer (own sockets or "
            "shared-memory segments; over TCP channel c prefers the peer's c-th interface, one "
            "per rail); unset: the tuner's choice",
     .min = 1, .max = 16},
    {.id = Id::socket_ifname, .name = "HOOP_SOCKET_IFNAME", .kind = K::text, .fallback = "",
     .doc = "interfaces for TCP, comma-separated: `eth` (prefix), `^docker` (exclude), `=eth0` "
            "(exact); unset: every interface that is up"},
    {.id = Id::socket_family, .name = "HOOP_SOCKET_FAMILY", .kind = K::choice, .fallback = "",
     .doc = "address family for TCP; unset: both", .choices = "AF_INET|AF_INET6",
     .aliases = "INET|IPV4|4|INET6|IPV6|6", .fold_case = true},
    {.id = Id::socket_buffer, .name = "HOOP_SOCKET_BUFFER", .kind = K::size, .fallback = "4M",
     .doc = "send and receive buffer of every TCP socket; 0 keeps the kernel's autotuning; unset "
            "on a link the calibration finds shaped (it sustains less than it bursts), both are "
            "2 ms of the sustained rate, at least 64K"},
    {.id = Id::tcp_staging_bytes, .name = "HOOP_TCP_STAGING_BYTES", .kind = K::size, .fallback = "4M",
     .doc = "receive staging buffer of every TCP link (at least 4K)"},
    {.id = Id::tcp_handshake_timeout, .name = "HOOP_TCP_HANDSHAKE_TIMEOUT", .kind = K::seconds, .fallback = "5",
     .doc = "a TCP connection that has not sent its whole handshake by then is dropped"},
    {.id = Id::tcp_congestion, .name = "HOOP_TCP_CONGESTION", .kind = K::text, .fallback = "",
     .doc = "congestion control of every TCP link: a name the kernel offers (cubic, reno, bbr...) or "
            "`system`; one it refuses is reported once and the system's kept; unset: cubic where the "
            "kernel lets the process choose it, else the system's (BBR's round-trip probes stall rings)"},
    {.id = Id::check, .name = "HOOP_CHECK", .kind = K::integer, .fallback = "0",
     .doc = "1: before every collective, compare each rank's call (op, dtype, redop, count, root) "
            "with its ring predecessor's: one extra empty message per rank and op",
     .min = 0, .max = 1},
    {.id = Id::secret, .name = "HOOP_SECRET", .kind = K::text, .fallback = "",
     .doc = "shared secret required in every connection handshake and by hoop's store; hoop-run "
            "draws a random one per job unless set (or `--secret`); docs/RELIABILITY.md says "
            "what it protects",
     .launcher = true, .hidden = true},
    {.id = Id::shm_ring_bytes, .name = "HOOP_SHM_RING_BYTES", .kind = K::size, .fallback = "4M",
     .doc = "shared-memory ring per direction of a link; unset: 4M, halved down to 16K on hosts of more than 32 ranks (the rings of every pair of a host's ranks within 4 GiB)", .max = int64_t{1} << 40},
    {.id = Id::slice_bytes, .name = "HOOP_SLICE_BYTES", .kind = K::size, .fallback = "256K",
     .doc = "largest piece of a transfer handed to a link at once (at least 4K)"},
    {.id = Id::spin_us, .name = "HOOP_SPIN_US", .kind = K::integer, .fallback = "30",
     .doc = "microseconds a wait busy-polls before it sleeps; unset: 30; where this machine runs more ranks than it has cores (yielding the core between looks), 1000 on a TCP link, 20 on a shared-memory link and 0 on a flag in the shared region", .min = 0, .max = kBillion},
    {.id = Id::kernel_isa, .name = "HOOP_KERNEL_ISA", .kind = K::choice, .fallback = "",
     .doc = "cap the reduction kernels' instruction set; unset: the widest this CPU has",
     .choices = "scalar|sse2|avx2|avx512", .on_bad = OnBad::warn},
    {.id = Id::direct_cell_bytes, .name = "HOOP_DIRECT_CELL_BYTES", .kind = K::size, .fallback = "64K",
     .doc = "shm-direct (ranks of one host): small-message cell per rank (whole pages)"},
    {.id = Id::direct_small_bytes, .name = "HOOP_DIRECT_SMALL_BYTES", .kind = K::size, .fallback = "16K",
     .doc = "shm-direct: largest input through the flag cells (at most a cell)"},
    {.id = Id::direct_chunk_bytes, .name = "HOOP_DIRECT_CHUNK_BYTES", .kind = K::size, .fallback = "512K",
     .doc = "shm-direct: pipelined chunk slot per rank and stage (whole pages)"},
    {.id = Id::direct_stages, .name = "HOOP_DIRECT_STAGES", .kind = K::integer, .fallback = "2",
     .doc = "shm-direct: chunks in flight", .min = 1, .max = 16},
    {.id = Id::direct_single_copy_bytes, .name = "HOOP_DIRECT_SINGLE_COPY_BYTES", .kind = K::size, .fallback = "64K",
     .doc = "shm-direct: ReduceScatter, AllGather and Broadcast from this size read peers' "
            "buffers with `process_vm_readv` (AllGather, with more ranks on the host than cores: "
            "from an eighth of it per rank times the ranks per core); unset: 64K times the calibrated "
            "kernel read's size over 32K (at least 1); 0 turns it off"},
    {.id = Id::direct_single_copy_allreduce_bytes, .name = "HOOP_DIRECT_SINGLE_COPY_ALLREDUCE_BYTES", .kind = K::size, .fallback = "64M",
     .doc = "shm-direct: AllReduce from this size reads peers' buffers with `process_vm_readv`"},
    {.id = Id::direct_single_copy_alltoall_bytes, .name = "HOOP_DIRECT_SINGLE_COPY_ALLTOALL_BYTES", .kind = K::size, .fallback = "4K",
     .doc = "shm-direct: AllToAll from this size times N² per rank (16K on 2 ranks, 256K on 8) reads "
            "peers' buffers with `process_vm_readv`; unset, where the calibrated kernel read pays only beyond 32K: "
            "from blocks of a quarter of that read if later; 0 turns it off"},
    {.id = Id::direct_single_copy_part_bytes, .name = "HOOP_DIRECT_SINGLE_COPY_PART_BYTES", .kind = K::size, .fallback = "1M",
     .doc = "shm-direct: bytes read per peer and `process_vm_readv` call (whole cache lines)"},
    {.id = Id::direct_registered_bytes, .name = "HOOP_DIRECT_REGISTERED_BYTES", .kind = K::size, .fallback = "1M",
     .doc = "shm-direct: AllReduce and Reduce from this size go zero copy when every rank's buffers "
            "are registered (`Communicator::alloc`); 0 turns it off"},
    {.id = Id::direct_stream_bytes, .name = "HOOP_DIRECT_STREAM_BYTES", .kind = K::size, .fallback = "16M",
     .doc = "shm-direct: outputs from this size are stored around the caches (non-temporal stores) "
            "where a rank copies them itself: zero copy's results, single copy's reads of registered "
            "buffers; 0 turns it off"},
    {.id = Id::host_id, .name = "HOOP_HOST_ID", .kind = K::text, .fallback = "",
     .doc = "override same-host detection (hoop-run --hosts sets the host's name); unset: host "
            "name, boot id and network namespace"},
    {.id = Id::trace, .name = "HOOP_TRACE", .kind = K::text, .fallback = "",
     .doc = "record every operation and each of its transfers (send, receive, reduce, copy, "
            "with peer, channel, bytes) into one Chrome/Perfetto trace at this path, merged "
            "from all ranks of the host at exit; unset: off"},
    {.id = Id::calibrate, .name = "HOOP_CALIBRATE", .kind = K::choice, .fallback = "1",
     .doc = "1: measure the cost model at start-up once per host and cache it; 0: the "
            "defaults; force: measure again",
     .choices = "0|1|force", .on_bad = OnBad::warn},
    {.id = Id::store_port, .name = "HOOP_STORE_PORT", .kind = K::integer, .fallback = "",
     .doc = "port of the store rank 0 serves without HOOP_STORE_ADDR; unset: MASTER_PORT + 1, "
            "a port derived from Slurm's or Open MPI's job, or 29411",
     .min = 1, .max = 65535},
    {.id = Id::rank, .name = "HOOP_RANK", .kind = K::integer, .fallback = "",
     .doc = "this rank's number", .min = 0, .max = kBillion, .launcher = true},
    {.id = Id::world_size, .name = "HOOP_WORLD_SIZE", .kind = K::integer, .fallback = "",
     .doc = "number of ranks", .min = 0, .max = kBillion, .launcher = true},
    {.id = Id::local_rank, .name = "HOOP_LOCAL_RANK", .kind = K::integer, .fallback = "",
     .doc = "this rank's number among the ranks of its host", .min = 0, .max = kBillion,
     .launcher = true},
    {.id = Id::local_size, .name = "HOOP_LOCAL_SIZE", .kind = K::integer, .fallback = "",
     .doc = "number of ranks on this rank's host", .min = 0, .max = kBillion, .launcher = true},
    {.id = Id::store_addr, .name = "HOOP_STORE_ADDR", .kind = K::text, .fallback = "",
     .doc = "`host:port` (`[v6]:port`) of the rendezvous store; unset: rank 0 serves one",
     .launcher = true},
    {.id = Id::job_id, .name = "HOOP_JOB_ID", .kind = K::text, .fallback = "",
     .doc = "the job's id, in shared-memory names and handshakes; unset: Slurm's or Open MPI's "
            "job",
     .launcher = true},
    {.id = Id::restart_count, .name = "HOOP_RESTART_COUNT", .kind = K::integer, .fallback = "0",
     .doc = "how often hoop-run has restarted the job (`--max-restarts`)", .min = 0,
     .max = kBillion, .launcher = true},
    {.id = Id::join, .name = "HOOP_JOIN", .kind = K::integer, .fallback = "0",
     .doc = "1: this rank replaces a dead one (`hoop-run --elastic`) and joins the running group "
            "(Communicator::join) instead of starting a new one", .min = 0, .max = 1, .launcher = true},
}};

// The rows are in the order of Id, so that param(id) is an index.
constexpr bool in_id_order() {
  for (size_t i = 0; i < kParams.size(); ++i) {
    if (static_cast<size_t>(kParams[i].id) != i) return false;
  }
  return true;
}
static_assert(in_id_order(), "kParams must list the variables in the order of params::Id");

}  // namespace

std::span<const Param> all() noexcept { return kParams; }

}  // namespace hoop::params
