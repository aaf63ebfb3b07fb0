// Ranks on several hosts: `hoop-run --hosts a:4,b:4 -- prog` or `--hostfile F`. Each rank is
// started through a launcher command (`--launcher 'ssh {host}'`, the default; in the network
// lab `ip netns exec {host}`), except on hosts that name this machine (localhost). The store is
// served by hoop-run on an address every host can reach: --store-addr, else the first host's
// address (its addr= in the hostfile, else its name resolved).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace hoop::run {

struct HostSpec {
  std::string name;    // what the launcher's {host} becomes; also the ranks' HOOP_HOST_ID
  int slots = 1;       // ranks on this host
  std::string addr;    // an address of the host reachable from the others (optional)
  std::string ifname;  // interfaces the ranks use for TCP: HOOP_SOCKET_IFNAME (optional)
};

struct HostOptions {
  std::vector<HostSpec> hosts;  // empty: every rank on this machine, as without these options
  std::string launcher = "ssh {host}";
  std::string store_addr;       // HOST or HOST:PORT; empty: the first host's address
};

// Where rank r runs: its host and its place among the ranks of that host.
struct RankPlacement {
  int host = 0;  // index into HostOptions::hosts
  int local_rank = 0;
  int local_size = 1;
};

// "a:4,b:4" / "a,b" (one slot each). Throws std::invalid_argument with the reason.
std::vector<HostSpec> parse_host_list(const std::string& text);
// Lines "NAME[:SLOTS] [slots=N] [addr=ADDRESS] [ifname=IFNAME]"; '#' starts a comment.
std::vector<HostSpec> parse_hostfile(const std::string& text);
std::vector<HostSpec> read_hostfile(const std::string& path);

// Fills the hosts in order, each up to its slots, with ranks 0..nranks-1.
std::vector<RankPlacement> place_ranks(const std::vector<HostSpec>& hosts, int nranks);
int total_slots(const std::vector<HostSpec>& hosts);

// True for names that mean this machine: "localhost", "127.0.0.1", "::1", its hostname.
bool is_this_machine(const std::string& host);

// Adds --hosts, --hostfile, --launcher and --store-addr to hoop-run's command line.
struct HostArgs {
  std::string hosts, hostfile, launcher, store_addr;
};
void add_host_options(CLI::App& app, HostArgs& args);
// Turns the parsed arguments into `out` and settles the number of ranks: with hosts and no -n,
// every slot; with -n, the first n slots (no more than there are). Throws std::invalid_argument.
void finish_host_options(const HostArgs& args, int& nranks, HostOptions& out);

// The store's address: what it binds and what the ranks are told.
struct StoreEndpoint {
  std::string advertised_host;  // in HOOP_STORE_ADDR and MASTER_ADDR
  uint16_t port = 0;            // 0: any free port
};
StoreEndpoint choose_store_endpoint(const HostOptions& opts);

}  // namespace hoop::run
