#include <nlohmann/json.hpp>

#include "comm/comm_impl.h"
#include "core/errors.h"

namespace hoop::detail {

std::string encode_peer_info(const PeerInfo& p) {
  nlohmann::json j;
  j["host_id"] = p.host_id;
  j["machine_id"] = p.machine_id;
  j["pid"] = p.pid;
  j["tcp"] = p.tcp;
  return j.dump();
}

PeerInfo decode_peer_info(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    PeerInfo p;
    p.host_id = j.at("host_id").get<std::string>();
    p.machine_id = j.at("machine_id").get<std::string>();
    p.pid = j.at("pid").get<int>();
    p.tcp = j.at("tcp").get<std::vector<std::string>>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorCode::protocol, fmt::format("malformed peer record '{}': {}", text, e.what()));
  }
}

}  // namespace hoop::detail
