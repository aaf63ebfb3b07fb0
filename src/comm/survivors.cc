#include "comm/survivors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>

#include "bootstrap/store_values.h"
#include "bootstrap/store_wait.h"
#include "core/clock.h"
#include "core/errors.h"

namespace hoop::detail {

namespace {

using std::chrono::milliseconds;

// How much later than the previous one each arrival starts proposing: the first proposes as
// soon as it can; the next ones are there in case it dies before it writes the decision.
constexpr milliseconds kStagger{250};
// The longest single wait while settling (parked at a TCP store: one request each).
constexpr milliseconds kSlice{100};
// How often a store that cannot park waits is checked.
constexpr milliseconds kPoll{10};

std::string text_of(const Bytes& b) { return std::string(b.begin(), b.end()); }

// "rank=value;" per survivor. Values are hoop's own ("0", "1", ""): no separators inside.
std::string encode(const std::vector<Survivor>& list) {
  std::string out;
  for (const auto& s : list) out += fmt::format("{}={};", s.rank, s.value);
  return out;
}

std::vector<Survivor> decode(const std::string& text, const ErrorContext& ctx) {
  std::vector<Survivor> list;
  size_t at = 0;
  while (at < text.size()) {
    const size_t eq = text.find('=', at), end = text.find(';', at);
    if (eq == std::string::npos || end == std::string::npos || eq > end) {
      throw_error(ErrorCode::protocol, fmt::format("malformed survivor list '{}' in the store", text), ctx);
    }
    Survivor s;
    const auto r = std::from_chars(text.data() + at, text.data() + eq, s.rank);
    if (r.ec != std::errc() || r.ptr != text.data() + eq) {
      throw_error(ErrorCode::protocol, fmt::format("malformed survivor list '{}' in the store", text), ctx);
    }
    s.value = text.substr(eq + 1, end - eq - 1);
    list.push_back(std::move(s));
    at = end + 1;
  }
  return list;
}

}  // namespace

std::vector<Survivor> settle_survivors(const SurvivorQuery& q, const std::string& mine) {
  Store& store = *q.store;
  const auto key = [&](const std::string& k) { return q.prefix + "/" + k; };
  const ErrorContext ctx{q.rank, q.op, 0, -1};
  const std::string decided_key = key("decided");

  const TimePoint start = Clock::now();
  const TimePoint deadline = start + q.timeout;
  store.set(key(fmt::format("v/{}", q.rank)), bootstrap::to_bytes(mine));
  const int64_t arrival = store.add(key("n"), 1);
  store.set(key(fmt::format("n/{}", arrival)), Bytes{});
  const TimePoint may_propose = start + kStagger * (arrival - 1);
  // Past this nobody is left to decide: every arrival's turn has come and gone.
  const TimePoint give_up = deadline + kStagger * (q.nranks + 1);

  const auto finish = [&](const std::string& text) {
    std::vector<Survivor> list = decode(text, ctx);
    const bool in = std::any_of(list.begin(), list.end(), [&](const Survivor& s) { return s.rank == q.rank; });
    if (!in) {
      std::vector<int> ranks;
      for (const auto& s : list) ranks.push_back(s.rank);
      throw_error(ErrorCode::peer_failure,
                  fmt::format("the other members went on without this rank (they settled on ranks {}: "
                              "this rank arrived after they decided, or they found it dead)",
                              fmt::join(ranks, ", ")),
                  ctx);
    }
    return list;
  };

  std::vector<bool> arrived(static_cast<size_t>(q.nranks), false);
  arrived[static_cast<size_t>(q.rank)] = true;
  for (;;) {
    const TimePoint now = Clock::now();
    if (now >= give_up) {
      throw_error(ErrorCode::timeout,
                  fmt::format("no decision on the surviving members within {:.3g} s", seconds_between(start, now)),
                  ctx);
    }
    if (now < may_propose) {
      const auto left = std::chrono::ceil<milliseconds>(may_propose - now);
      if (bootstrap::key_set_within(store, decided_key, std::min(left, kSlice), kPoll)) {
        return finish(text_of(store.get(decided_key)));
      }
      continue;
    }
    std::vector<bool> dead(static_cast<size_t>(q.nranks), false);
    int ndead = 0;
    for (int r : q.dead()) {
      if (r >= 0 && r < q.nranks && r != q.rank && !dead[static_cast<size_t>(r)]) {
        dead[static_cast<size_t>(r)] = true;
        ++ndead;
      }
    }
    const std::string last_arrival = key(fmt::format("n/{}", q.nranks - ndead));
    bool ready = now >= deadline;
    // The count, not the key of the last arrival expected: a member that died between counting
    // itself in and setting its n/<i> leaves that key unset for good.
    if (!ready && store.add(key("n"), 0) >= q.nranks - ndead) {
      ready = true;
      for (int r = 0; r < q.nranks && ready; ++r) {
        bool seen = arrived[static_cast<size_t>(r)];
        if (!dead[static_cast<size_t>(r)] && !seen) seen = store.check(key(fmt::format("v/{}", r)));
        arrived[static_cast<size_t>(r)] = seen;
        ready = dead[static_cast<size_t>(r)] || seen;
      }
    }
    if (ready) {
      std::vector<Survivor> list;
      for (int r = 0; r < q.nranks; ++r) {
        if (dead[static_cast<size_t>(r)]) continue;
        const std::string vkey = key(fmt::format("v/{}", r));
        if (r == q.rank) {
          list.push_back({r, mine});
        } else if (arrived[static_cast<size_t>(r)] || store.check(vkey)) {
          list.push_back({r, text_of(store.get(vkey))});
        }
      }
      return finish(text_of(store.compare_set(decided_key, Bytes{}, bootstrap::to_bytes(encode(list)))));
    }
    // Not everyone yet: wait for the last arrival expected (a death meanwhile changes which one
    // that is, and a dead member may leave a hole, hence the slice), then for another proposer's
    // decision.
    bootstrap::key_set_within(store, last_arrival, kSlice, kPoll);
    if (store.check(decided_key)) return finish(text_of(store.get(decided_key)));
  }
}

}  // namespace hoop::detail
