#include "hosts.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace hoop::run {

namespace {

int parse_slots(const std::string& text, const std::string& where) {
  size_t used = 0;
  int slots = 0;
  try {
    slots = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || slots < 1 || slots > 4096)
    throw std::invalid_argument(where + ": slots must be a number from 1 to 4096, got '" + text + "'");
  return slots;
}

// "name" or "name:slots". An IPv6 literal needs brackets to carry slots: "[::1]:2".
HostSpec parse_host_word(const std::string& word, const std::string& where) {
  HostSpec h;
  std::string name = word, slots;
  if (!word.empty() && word.front() == '[') {
    const size_t close = word.find(']');
    if (close == std::string::npos) throw std::invalid_argument(where + ": unclosed '[' in '" + word + "'");
    name = word.substr(1, close - 1);
    if (close + 1 < word.size()) {
      if (word[close + 1] != ':') throw std::invalid_argument(where + ": expected ':' after ']' in '" + word + "'");
      slots = word.substr(close + 2);
    }
  } else if (std::count(word.begin(), word.end(), ':') == 1) {
    const size_t colon = word.find(':');
    name = word.substr(0, colon);
    slots = word.substr(colon + 1);
  }
  if (name.empty()) throw std::invalid_argument(where + ": empty host name in '" + word + "'");
  h.name = name;
  if (!slots.empty() || word.back() == ':') h.slots = parse_slots(slots, where);
  return h;
}

std::string resolve_ipv4_first(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return {};
  std::string best;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = ai->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr);
    if (!::inet_ntop(ai->ai_family, raw, text, sizeof text)) continue;
    if (ai->ai_family == AF_INET) {
      best = text;
      break;
    }
    if (best.empty()) best = text;
  }
  ::freeaddrinfo(found);
  return best;
}

std::string this_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

}  // namespace

std::vector<HostSpec> parse_host_list(const std::string& text) {
  std::vector<HostSpec> hosts;
  std::string word;
  std::istringstream in(text);
  while (std::getline(in, word, ',')) {
    if (word.empty()) continue;
    hosts.push_back(parse_host_word(word, "--hosts"));
  }
  if (hosts.empty()) throw std::invalid_argument("--hosts: no host in '" + text + "'");
  return hosts;
}

std::vector<HostSpec> parse_hostfile(const std::string& text) {
  std::vector<HostSpec> hosts;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    const std::string where = "hostfile line " + std::to_string(number);
    HostSpec h = parse_host_word(word, where);
    while (words >> word) {
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq == std::string::npos ? word.size() : eq);
      const std::string value = eq == std::string::npos ? std::string() : word.substr(eq + 1);
      if (key == "slots") {
        h.slots = parse_slots(value, where);
      } else if (key == "addr" && !value.empty()) {
        h.addr = value;
      } else if (key == "ifname" && !value.empty()) {
        h.ifname = value;
      } else {
        throw std::invalid_argument(where + ": expected slots=N, addr=ADDRESS or ifname=NAME, got '" +
                                    word + "'");
      }
    }
    hosts.push_back(h);
  }
  if (hosts.empty()) throw std::invalid_argument("the hostfile names no host");
  return hosts;
}

std::vector<HostSpec> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read hostfile " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str());
}

int total_slots(const std::vector<HostSpec>& hosts) {
  int total = 0;
  for (const auto& h : hosts) total += h.slots;
  return total;
}

std::vector<RankPlacement> place_ranks(const std::vector<HostSpec>& hosts, int nranks) {
  std::vector<RankPlacement> out;
  for (int h = 0; h < static_cast<int>(hosts.size()) && static_cast<int>(out.size()) < nranks; ++h) {
    const int here = std::min(hosts[static_cast<size_t>(h)].slots, nranks - static_cast<int>(out.size()));
    for (int l = 0; l < here; ++l) out.push_back({h, l, here});
  }
  if (static_cast<int>(out.size()) < nranks)
    throw std::invalid_argument("the hosts have " + std::to_string(total_slots(hosts)) +
                                " slots, fewer than the " + std::to_string(nranks) + " ranks asked for");
  return out;
}

bool is_this_machine(const std::string& host) {
  return host == "localhost" || host == "127.0.0.1" || host == "::1" || host == this_hostname();
}

void add_host_options(CLI::App& app, HostArgs& args) {
  auto* hosts = app.add_option("--hosts", args.hosts,
                               "run on these hosts: NAME[:SLOTS],... (ranks fill them in order)");
  auto* hostfile = app.add_option("--hostfile", args.hostfile,
                                  "hosts from a file: NAME[:SLOTS] [slots=N] [addr=A] [ifname=I] a line");
  hosts->excludes(hostfile);
  app.add_option("--launcher", args.launcher,
                 "command that starts a rank on {host} (default 'ssh {host}'; 'ip netns exec {host}' "
                 "for network namespaces); not used for localhost");
  app.add_option("--store-addr", args.store_addr,
                 "HOST[:PORT] of the store, reachable from every host (default: the first host)");
}

void finish_host_options(const HostArgs& args, int& nranks, HostOptions& out) {
  if (!args.hosts.empty()) out.hosts = parse_host_list(args.hosts);
  if (!args.hostfile.empty()) out.hosts = read_hostfile(args.hostfile);
  if (!args.launcher.empty()) {
    if (args.launcher.find("{host}") == std::string::npos)
      throw std::invalid_argument("--launcher must contain {host}, e.g. 'ssh {host}'");
    out.launcher = args.launcher;
  }
  out.store_addr = args.store_addr;
  if (out.hosts.empty()) {
    if (!args.launcher.empty() || !args.store_addr.empty())
      throw std::invalid_argument("--launcher and --store-addr need --hosts or --hostfile");
    if (nranks <= 0) throw std::invalid_argument("-n N is required (or --hosts / --hostfile)");
    return;
  }
  if (nranks <= 0) nranks = total_slots(out.hosts);
  place_ranks(out.hosts, nranks);  // throws when they do not fit
}

StoreEndpoint choose_store_endpoint(const HostOptions& opts) {
  StoreEndpoint ep;
  if (!opts.store_addr.empty()) {
    std::string host = opts.store_addr, port;
    if (host.front() == '[') {
      const size_t close = host.find(']');
      if (close == std::string::npos) throw std::invalid_argument("--store-addr: unclosed '['");
      if (close + 1 < host.size() && host[close + 1] == ':') port = host.substr(close + 2);
      host = host.substr(1, close - 1);
    } else if (std::count(host.begin(), host.end(), ':') == 1) {
      port = host.substr(host.find(':') + 1);
      host = host.substr(0, host.find(':'));
    }
    ep.advertised_host = host;
    if (!port.empty()) {
      const bool digits = port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
        return c >= '0' && c <= '9';
      });
      const int p = digits ? std::stoi(port) : 0;
      if (p < 1 || p > 65535) throw std::invalid_argument("--store-addr: bad port '" + port + "'");
      ep.port = static_cast<uint16_t>(p);
    }
    if (ep.advertised_host.empty()) throw std::invalid_argument("--store-addr: no host");
    return ep;
  }
  const HostSpec& first = opts.hosts.front();
  const bool all_local = std::all_of(opts.hosts.begin(), opts.hosts.end(),
                                     [](const HostSpec& h) { return is_this_machine(h.name); });
  if (!first.addr.empty()) {
    ep.advertised_host = first.addr;
  } else if (all_local) {
    ep.advertised_host = "127.0.0.1";
  } else {
    const std::string name = is_this_machine(first.name) ? this_hostname() : first.name;
    ep.advertised_host = resolve_ipv4_first(name);
    if (ep.advertised_host.empty())
      throw std::invalid_argument("cannot resolve the first host '" + name +
                                  "' for the store: give --store-addr or addr= in the hostfile");
  }
  return ep;
}

}  // namespace hoop::run
