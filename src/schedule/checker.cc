#include "schedule/checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "hoop/error.h"

namespace hoop::schedule {

namespace {

struct Failure {
  std::string what;
};

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t leaf_expr(int rank) { return mix(0x1000 + static_cast<uint64_t>(rank)); }
// Commutative (a op b == b op a bit for bit) but not associative, like floating-point addition.
uint64_t reduce_expr(uint64_t a, uint64_t b) { return mix(std::min(a, b) * 31 + mix(std::max(a, b))); }
uint64_t avg_expr(uint64_t a) { return mix(a ^ 0xa5a5a5a5a5a5a5a5ull); }

constexpr int64_t kUndefined = -1;

// A run of elements with one symbolic value: element j of the run is input element index + j.
struct Run {
  size_t len = 0;
  int64_t index = kUndefined;
  uint64_t ranks = 0;  // the ranks whose inputs were reduced into it
  uint64_t expr = 0;   // hash of the expression tree
  int avg = 0;         // times divided by nranks
};
using Runs = std::vector<Run>;

bool continues(const Run& a, const Run& b) {
  if (a.ranks != b.ranks || a.expr != b.expr || a.avg != b.avg) return false;
  if (a.index == kUndefined || b.index == kUndefined) return a.index == b.index;
  return b.index == a.index + static_cast<int64_t>(a.len);
}

void append(Runs& v, const Run& x) {
  if (x.len == 0) return;
  if (!v.empty() && continues(v.back(), x)) {
    v.back().len += x.len;
  } else {
    v.push_back(x);
  }
}

size_t total(const Runs& v) {
  size_t n = 0;
  for (const Run& r : v) n += r.len;
  return n;
}

// One physical buffer of a rank, as runs of symbolic values.
class Memory {
 public:
  Memory() = default;
  explicit Memory(size_t size) : size_(size) { append(runs_, Run{size}); }

  size_t size() const { return size_; }

  Runs read(size_t off, size_t cnt) const {
    Runs out;
    size_t pos = 0;
    for (const Run& r : runs_) {
      const size_t end = pos + r.len;
      const size_t lo = std::max(pos, off), hi = std::min(end, off + cnt);
      if (lo < hi) {
        Run piece = r;
        piece.len = hi - lo;
        if (r.index != kUndefined) piece.index = r.index + static_cast<int64_t>(lo - pos);
        append(out, piece);
      }
      pos = end;
      if (pos >= off + cnt) break;
    }
    return out;
  }

  // Replaces the runs covering [off, off + total(v)) and merges with the neighbours.
  void write(size_t off, const Runs& v) {
    const size_t cnt = total(v);
    if (cnt == 0) return;
    size_t first = 0, pos = 0;
    while (first < runs_.size() && pos + runs_[first].len <= off) pos += runs_[first++].len;
    size_t last = first, end = pos;  // runs [first, last) start before off + cnt
    while (last < runs_.size() && end < off + cnt) end += runs_[last++].len;
    Runs mid;
    if (first > 0) append(mid, runs_[first - 1]);
    if (pos < off) {
      Run head = runs_[first];
      head.len = off - pos;
      append(mid, head);
    }
    for (const Run& r : v) append(mid, r);
    if (end > off + cnt) {
      Run tail = runs_[last - 1];
      const size_t cut = tail.len - (end - off - cnt);
      tail.len -= cut;
      if (tail.index != kUndefined) tail.index += static_cast<int64_t>(cut);
      append(mid, tail);
    }
    if (last < runs_.size()) append(mid, runs_[last++]);
    const size_t from = first > 0 ? first - 1 : 0;
    runs_.erase(runs_.begin() + static_cast<ptrdiff_t>(from), runs_.begin() + static_cast<ptrdiff_t>(last));
    runs_.insert(runs_.begin() + static_cast<ptrdiff_t>(from), mid.begin(), mid.end());
  }

 private:
  size_t size_ = 0;
  Runs runs_;
};

// Where a logical buffer (send, recv, scratch) lives in a rank's physical memory.
struct View {
  int mem = 0;
  size_t base = 0;
  size_t size = 0;
  bool writable = false;
};

struct Span {
  int mem = 0;
  size_t lo = 0, hi = 0;
  bool overlaps(const Span& o) const { return mem == o.mem && lo < o.hi && o.lo < hi; }
};

struct Ref {
  int rank = -1;
  size_t step = 0;
  size_t idx = 0;
};

bool is_transfer(const Action& a) {
  return a.kind == ActionKind::send || a.kind == ActionKind::recv_copy ||
         a.kind == ActionKind::recv_reduce;
}
bool is_recv(const Action& a) {
  return a.kind == ActionKind::recv_copy || a.kind == ActionKind::recv_reduce;
}

const char* buf_name(Buf b) {
  switch (b) {
    case Buf::send: return "send";
    case Buf::recv: return "recv";
    case Buf::scratch: return "scratch";
  }
  return "?";
}

std::string range_text(const Range& r) {
  return fmt::format("{}[{}..{})", buf_name(r.buf), r.offset, r.offset + r.count);
}

std::string action_text(const Action& a) {
  std::string ch = a.channel != 0 ? fmt::format(" channel {}", a.channel) : "";
  switch (a.kind) {
    case ActionKind::send:
      return fmt::format("send {} to rank {}{}{}", range_text(a.src), a.peer, ch,
                         a.after >= 0 ? fmt::format(" after action {}", a.after) : "");
    case ActionKind::recv_copy:
      return fmt::format("recv {} from rank {}{}", range_text(a.dst), a.peer, ch);
    case ActionKind::recv_reduce:
      return fmt::format("recv-reduce {} = {} op data from rank {}{}", range_text(a.dst),
                         range_text(a.src), a.peer, ch);
    case ActionKind::copy: return fmt::format("copy {} to {}", range_text(a.src), range_text(a.dst));
    case ActionKind::finish_avg: return fmt::format("divide {} by nranks", range_text(a.dst));
  }
  return "?";
}

std::string ranks_text(uint64_t mask) {
  std::string out = "{";
  for (int r = 0; r < 64; ++r) {
    if (!(mask >> r & 1)) continue;
    if (out.size() > 1) out += ",";
    out += std::to_string(r);
  }
  return out + "}";
}

std::string value_text(const Run& r, size_t offset_in_run) {
  if (r.index == kUndefined) return "undefined data";
  return fmt::format("element {} of ranks {}{}", r.index + static_cast<int64_t>(offset_in_run),
                     ranks_text(r.ranks), r.avg ? fmt::format(" divided {} time(s)", r.avg) : "");
}

class Checker {
 public:
  Checker(const CollectiveDesc& d, const std::vector<RankSchedule>& s) : d_(d), s_(s), n_(d.nranks) {}

  void run() {
    if (n_ < 1 || n_ > kCheckerMaxRanks) {
      fail(fmt::format("the checker handles 1..{} ranks", kCheckerMaxRanks));
    }
    if (d_.op == OpType::send || d_.op == OpType::recv) fail("point-to-point is not modelled");
    if (s_.size() != static_cast<size_t>(n_)) {
      fail(fmt::format("{} schedules for {} ranks", s_.size(), n_));
    }
    for (int r = 0; r < n_; ++r) setup_rank(r);
    for (int r = 0; r < n_; ++r) check_static(r);
    match();
    simulate();
    check_outputs();
  }

 private:
  struct RankState {
    std::vector<Memory> mem;  // 0: send, 1: recv, 2: scratch (in place, send or recv may be unused)
    View views[3];
    size_t step = 0;
    std::vector<bool> done;  // per action of the current step
    size_t pending = 0;      // transfers of the current step not yet complete
    uint64_t know = 0;       // ranks heard from (transitively)
    uint64_t know_at_step = 0;
    std::vector<uint64_t> delivered;  // knowledge brought by each receive of the current step
    std::vector<std::vector<Ref>> partner;  // [step][action]
  };

  // ---- context and failure text

  std::string header() const {
    std::string alg = s_.empty() ? std::string("?") : s_[0].algorithm;
    std::string h = fmt::format("{} {} N={} count={} {}", alg, to_string(d_.op), n_, d_.count,
                                d_.in_place ? "in-place" : "out-of-place");
    if (d_.op == OpType::broadcast || d_.op == OpType::reduce) h += fmt::format(" root={}", d_.root);
    if (d_.op == OpType::allreduce || d_.op == OpType::reducescatter || d_.op == OpType::reduce) {
      h += fmt::format(" {}", to_string(d_.redop));
    }
    return h;
  }

  [[noreturn]] void fail(const std::string& what) const { throw Failure{header() + ": " + what}; }

  [[noreturn]] void fail_at(int r, size_t step, size_t idx, const std::string& what) const {
    const Action& a = action(r, step, idx);
    fail(fmt::format("rank {} step {} action {} ({}): {}", r, step, idx, action_text(a), what));
  }

  const Action& action(int r, size_t step, size_t idx) const {
    return s_[static_cast<size_t>(r)].steps[step].actions[idx];
  }
  const std::vector<Step>& steps(int r) const { return s_[static_cast<size_t>(r)].steps; }
  RankState& st(int r) { return ranks_[static_cast<size_t>(r)]; }

  // ---- buffers

  Runs inputs(int r, size_t first, size_t count) const {
    Runs v;
    append(v, Run{count, static_cast<int64_t>(first), uint64_t{1} << r, leaf_expr(r), 0});
    return v;
  }

  void setup_rank(int r) {
    ranks_.resize(static_cast<size_t>(n_));
    RankState& rs = st(r);
    const size_t c = d_.count, nc = c * static_cast<size_t>(n_);
    const bool root = r == d_.root;
    size_t send_size = 0, recv_size = 0;
    switch (d_.op) {
      case OpType::allreduce: send_size = c; recv_size = c; break;
      case OpType::reducescatter: send_size = nc; recv_size = c; break;
      case OpType::allgather: send_size = c; recv_size = nc; break;
      case OpType::broadcast: send_size = root ? c : 0; recv_size = c; break;
      case OpType::reduce: send_size = c; recv_size = root ? c : 0; break;
      default: break;
    }
    rs.mem.assign(3, Memory());
    rs.mem[0] = Memory(send_size);
    rs.mem[1] = Memory(recv_size);
    rs.mem[2] = Memory(s_[static_cast<size_t>(r)].scratch_count);
    rs.views[0] = View{0, 0, send_size, false};
    rs.views[1] = View{1, 0, recv_size, true};
    rs.views[2] = View{2, 0, rs.mem[2].size(), true};
    const size_t off = static_cast<size_t>(r) * c;
    if (send_size > 0) rs.mem[0].write(0, inputs(r, 0, send_size));
    // In place (NCCL's conventions), one buffer serves both roles and may be written.
    const bool one_buffer = d_.in_place && send_size > 0 && recv_size > 0;
    if (one_buffer) {
      switch (d_.op) {
        case OpType::reducescatter:
          rs.views[0].writable = true;
          rs.views[1] = View{0, off, c, true};
          break;
        case OpType::allgather:
          rs.mem[1].write(off, inputs(r, 0, c));
          rs.views[0] = View{1, off, c, true};
          break;
        default:  // allreduce, broadcast and reduce at the root: send == recv
          rs.mem[1].write(0, inputs(r, 0, c));
          rs.views[0] = View{1, 0, c, true};
          break;
      }
    }
    rs.know = uint64_t{1} << r;
    rs.partner.resize(steps(r).size());
    for (size_t k = 0; k < steps(r).size(); ++k) rs.partner[k].resize(steps(r)[k].actions.size());
  }

  const View& view(int r, Buf b) { return st(r).views[static_cast<size_t>(b)]; }

  Span span(int r, const Range& range) {
    const View& v = view(r, range.buf);
    return Span{v.mem, v.base + range.offset, v.base + range.offset + range.count};
  }

  Runs read(int r, const Range& range) {
    const View& v = view(r, range.buf);
    return st(r).mem[static_cast<size_t>(v.mem)].read(v.base + range.offset, range.count);
  }

  void write(int r, const Range& range, const Runs& vals) {
    const View& v = view(r, range.buf);
    st(r).mem[static_cast<size_t>(v.mem)].write(v.base + range.offset, vals);
  }

  // ---- static checks of one rank's schedule

  void check_range(int r, size_t k, size_t i, const Range& range, bool writes) {
    const View& v = view(r, range.buf);
    if (range.offset > v.size || range.count > v.size - range.offset) {
      fail_at(r, k, i, fmt::format("{} is outside the {} buffer of {} elements", range_text(range),
                                   buf_name(range.buf), v.size));
    }
    if (writes && range.count > 0 && !v.writable) {
      fail_at(r, k, i, fmt::format("writes the {} buffer, which holds the caller's input",
                                   buf_name(range.buf)));
    }
  }

  void check_static(int r) {
    const int nch = std::max(1, d_.nchannels);
    for (size_t k = 0; k < steps(r).size(); ++k) {
      const auto& acts = steps(r)[k].actions;
      for (size_t i = 0; i < acts.size(); ++i) {
        const Action& a = acts[i];
        if (is_transfer(a)) {
          if (a.peer < 0 || a.peer >= n_ || a.peer == r) fail_at(r, k, i, "invalid peer");
          if (a.channel < 0 || a.channel >= nch) {
            fail_at(r, k, i, fmt::format("channel outside [0, {})", nch));
          }
        }
        if (a.after >= 0) {
          if (a.kind != ActionKind::send) fail_at(r, k, i, "only a send may wait for a receive");
          if (static_cast<size_t>(a.after) >= acts.size() || !is_recv(acts[static_cast<size_t>(a.after)])) {
            fail_at(r, k, i, "`after` does not name a receive of the same step");
          }
        }
        switch (a.kind) {
          case ActionKind::send: check_range(r, k, i, a.src, false); break;
          case ActionKind::recv_copy: check_range(r, k, i, a.dst, true); break;
          case ActionKind::recv_reduce:
          case ActionKind::copy:
            check_range(r, k, i, a.src, false);
            check_range(r, k, i, a.dst, true);
            if (a.src.count != a.dst.count) fail_at(r, k, i, "source and destination differ in size");
            break;
          case ActionKind::finish_avg:
            check_range(r, k, i, a.dst, true);
            if (d_.redop != RedOp::avg) fail_at(r, k, i, "divides, but the operation is not avg");
            break;
        }
        if (a.kind == ActionKind::recv_reduce) {
          const Span s = span(r, a.src), t = span(r, a.dst);
          if (s.overlaps(t) && s.lo != t.lo) {
            fail_at(r, k, i, "reduces from a range that partly overlaps its destination");
          }
        }
      }
      check_concurrency(r, k);
    }
  }

  // Transfers of one step run at once: no overlapping writes, no reading what another writes,
  // except a send forwarding (after) the receive that writes where it reads.
  void check_concurrency(int r, size_t k) {
    const auto& acts = steps(r)[k].actions;
    auto writes = [&](const Action& a, Span* out) {
      if (!is_recv(a) || a.dst.count == 0) return false;
      *out = span(r, a.dst);
      return true;
    };
    auto reads = [&](const Action& a, Span* out) {
      if ((a.kind != ActionKind::send && a.kind != ActionKind::recv_reduce) || a.src.count == 0) return false;
      *out = span(r, a.src);
      return true;
    };
    for (size_t i = 0; i < acts.size(); ++i) {
      if (!is_transfer(acts[i])) continue;
      Span wi;
      if (!writes(acts[i], &wi)) continue;
      for (size_t j = 0; j < acts.size(); ++j) {
        if (j == i || !is_transfer(acts[j])) continue;
        Span other;
        if (j > i && writes(acts[j], &other) && other.overlaps(wi)) {
          fail_at(r, k, j, fmt::format("writes memory that action {} ({}) writes in the same step", i,
                                       action_text(acts[i])));
        }
        if (reads(acts[j], &other) && other.overlaps(wi)) {
          const Action& fwd = acts[j];
          const bool forwarding = fwd.kind == ActionKind::send && fwd.after == static_cast<int>(i) &&
                                  other.mem == wi.mem && other.lo == wi.lo && other.hi <= wi.hi;
          if (!forwarding) {
            fail_at(r, k, j, fmt::format("reads memory that action {} ({}) writes in the same step", i,
                                         action_text(acts[i])));
          }
        }
      }
    }
  }

  // ---- matching sends with receives

  void match() {
    // Messages per (from, to, channel), in program order.
    const int nch = std::max(1, d_.nchannels);
    auto key = [&](int from, int to, int ch) {
      return (static_cast<size_t>(from) * static_cast<size_t>(n_) + static_cast<size_t>(to)) *
                 static_cast<size_t>(nch) + static_cast<size_t>(ch);
    };
    const size_t nkeys = key(n_ - 1, n_ - 1, nch - 1) + 1;
    std::vector<std::vector<Ref>> sends(nkeys), recvs(nkeys);
    for (int r = 0; r < n_; ++r) {
      for (size_t k = 0; k < steps(r).size(); ++k) {
        const auto& acts = steps(r)[k].actions;
        for (size_t i = 0; i < acts.size(); ++i) {
          const Action& a = acts[i];
          if (a.kind == ActionKind::send) sends[key(r, a.peer, a.channel)].push_back({r, k, i});
          if (is_recv(a)) recvs[key(a.peer, r, a.channel)].push_back({r, k, i});
        }
      }
    }
    auto count_of = [&](const Ref& x) {
      const Action& a = action(x.rank, x.step, x.idx);
      return a.kind == ActionKind::send ? a.src.count : a.dst.count;
    };
    for (int from = 0; from < n_; ++from) {
      for (int to = 0; to < n_; ++to) {
        for (int ch = 0; ch < nch; ++ch) {
          const auto& out = sends[key(from, to, ch)];
          const auto& in = recvs[key(from, to, ch)];
          for (size_t m = 0; m < std::min(out.size(), in.size()); ++m) {
            const Ref& s = out[m];
            const Ref& t = in[m];
            if (count_of(s) != count_of(t)) {
              fail_at(s.rank, s.step, s.idx,
                      fmt::format("sends {} elements, but the matching receive (rank {} step {} "
                                  "action {}: {}) takes {}",
                                  count_of(s), t.rank, t.step, t.idx,
                                  action_text(action(t.rank, t.step, t.idx)), count_of(t)));
            }
            st(s.rank).partner[s.step][s.idx] = t;
            st(t.rank).partner[t.step][t.idx] = s;
          }
          if (out.size() > in.size()) {
            const Ref& s = out[in.size()];
            fail_at(s.rank, s.step, s.idx,
                    fmt::format("message {} from rank {} to rank {} (channel {}) is never received: "
                                "rank {} receives {} message(s) from it",
                                in.size(), from, to, ch, to, in.size()));
          }
          if (in.size() > out.size()) {
            const Ref& t = in[out.size()];
            fail_at(t.rank, t.step, t.idx,
                    fmt::format("waits for message {} from rank {}, which sends only {} to rank {}",
                                out.size(), from, out.size(), to));
          }
        }
      }
    }
  }

  // ---- simulation

  Runs reduce(int r, size_t k, size_t i, const Runs& local, const Runs& incoming) {
    Runs out;
    size_t a = 0, b = 0, a_used = 0, b_used = 0, pos = 0;
    while (a < local.size() && b < incoming.size()) {
      const Run& x = local[a];
      const Run& y = incoming[b];
      const size_t len = std::min(x.len - a_used, y.len - b_used);
      const int64_t xi = x.index == kUndefined ? kUndefined : x.index + static_cast<int64_t>(a_used);
      const int64_t yi = y.index == kUndefined ? kUndefined : y.index + static_cast<int64_t>(b_used);
      auto where = [pos] { return fmt::format("at element {} of the range", pos); };
      if (xi == kUndefined || yi == kUndefined) {
        fail_at(r, k, i, fmt::format("reduces undefined data {} (local: {}; received: {})", where(),
                                     value_text(x, a_used), value_text(y, b_used)));
      }
      if (xi != yi) {
        fail_at(r, k, i, fmt::format("combines different elements {}: local {} with received {}",
                                     where(), value_text(x, a_used), value_text(y, b_used)));
      }
      if (x.ranks & y.ranks) {
        fail_at(r, k, i, fmt::format("counts rank(s) {} twice {}: local {} with received {}",
                                     ranks_text(x.ranks & y.ranks), where(), value_text(x, a_used),
                                     value_text(y, b_used)));
      }
      if (x.avg != y.avg) {
        fail_at(r, k, i, fmt::format("combines a value divided {} time(s) with one divided {} {}",
                                     x.avg, y.avg, where()));
      }
      append(out, Run{len, xi, x.ranks | y.ranks, reduce_expr(x.expr, y.expr), x.avg});
      pos += len;
      a_used += len;
      b_used += len;
      if (a_used == x.len) ++a, a_used = 0;
      if (b_used == y.len) ++b, b_used = 0;
    }
    return out;
  }

  void run_local(int r, size_t k, size_t i) {
    const Action& a = action(r, k, i);
    if (a.kind == ActionKind::copy) {
      write(r, a.dst, read(r, a.src));
    } else if (a.kind == ActionKind::finish_avg) {
      Runs v = read(r, a.dst);
      for (Run& x : v) {
        if (x.index == kUndefined) fail_at(r, k, i, "divides undefined data");
        ++x.avg;
        x.expr = avg_expr(x.expr);
      }
      write(r, a.dst, v);
    }
  }

  // Starts this rank's next steps until one has transfers to wait for.
  void enter(int r) {
    RankState& rs = st(r);
    while (rs.step < steps(r).size()) {
      const auto& acts = steps(r)[rs.step].actions;
      rs.done.assign(acts.size(), false);
      rs.delivered.assign(acts.size(), 0);
      rs.know_at_step = rs.know;
      rs.pending = 0;
      for (size_t i = 0; i < acts.size(); ++i) {
        if (is_transfer(acts[i])) {
          ++rs.pending;
        } else {
          run_local(r, rs.step, i);
          rs.done[i] = true;
        }
      }
      if (rs.pending > 0) return;
      ++rs.step;
    }
  }

  bool finished(int r) { return st(r).step >= steps(r).size(); }

  // Whether every earlier transfer of the step on the same peer, direction and channel is done.
  bool at_head(int r, size_t idx) {
    const auto& acts = steps(r)[st(r).step].actions;
    const Action& a = acts[idx];
    for (size_t i = 0; i < idx; ++i) {
      const Action& b = acts[i];
      if (!is_transfer(b) || (b.kind == ActionKind::send) != (a.kind == ActionKind::send)) continue;
      if (b.peer == a.peer && b.channel == a.channel && !st(r).done[i]) return false;
    }
    return true;
  }

  void complete(int r, size_t idx) {
    RankState& rs = st(r);
    rs.done[idx] = true;
    if (--rs.pending == 0) {
      ++rs.step;
      enter(r);
    }
  }

  // Tries to move send `idx` of rank r's current step. Returns whether it completed.
  bool try_send(int r, size_t idx) {
    RankState& rs = st(r);
    const size_t k = rs.step;
    const Action& a = action(r, k, idx);
    const Ref t = rs.partner[k][idx];
    RankState& ts = st(t.rank);
    if (finished(t.rank) || ts.step != t.step || ts.done[t.idx]) return false;
    if (a.after >= 0 && !rs.done[static_cast<size_t>(a.after)]) return false;
    if (!at_head(r, idx) || !at_head(t.rank, t.idx)) return false;
    const Runs payload = read(r, a.src);
    const uint64_t know = rs.know_at_step | (a.after >= 0 ? rs.delivered[static_cast<size_t>(a.after)] : 0);
    const Action& b = action(t.rank, t.step, t.idx);
    if (b.kind == ActionKind::recv_copy) {
      write(t.rank, b.dst, payload);
    } else {
      write(t.rank, b.dst, reduce(t.rank, t.step, t.idx, read(t.rank, b.src), payload));
    }
    ts.know |= know;
    ts.delivered[t.idx] = know;
    complete(t.rank, t.idx);
    complete(r, idx);
    return true;
  }

  void simulate() {
    for (int r = 0; r < n_; ++r) enter(r);
    bool progress = true;
    while (progress) {
      progress = false;
      for (int r = 0; r < n_; ++r) {
        bool moved = true;
        while (moved && !finished(r)) {
          moved = false;
          const auto& acts = steps(r)[st(r).step].actions;
          for (size_t i = 0; i < acts.size(); ++i) {
            if (acts[i].kind != ActionKind::send || st(r).done[i]) continue;
            if (try_send(r, i)) {
              moved = progress = true;
              break;  // the step may have changed
            }
          }
        }
      }
    }
    std::string waiting;
    int stuck = 0;
    for (int r = 0; r < n_; ++r) {
      if (finished(r)) continue;
      if (++stuck > 8) continue;
      const size_t k = st(r).step;
      const auto& acts = steps(r)[k].actions;
      for (size_t i = 0; i < acts.size(); ++i) {
        if (st(r).done[i]) continue;
        const Ref t = st(r).partner[k][i];
        const std::string peer_state =
            finished(t.rank) ? "finished"
                             : fmt::format("at step {}, the message is in its step {}", st(t.rank).step, t.step);
        waiting += fmt::format("\n  rank {} step {} action {} ({}) waits for rank {} ({})", r, k, i,
                               action_text(acts[i]), acts[i].peer, peer_state);
        break;
      }
    }
    if (stuck > 0) {
      fail(fmt::format("deadlock: {} rank(s) cannot finish{}{}", stuck, waiting,
                       stuck > 8 ? "\n  ..." : ""));
    }
  }

  // ---- outputs

  // Checks `cnt` elements at `off` of rank r's recv: element j must be input element
  // first + j of exactly the ranks in `ranks`, divided `avg` times.
  void expect(int r, size_t off, size_t cnt, size_t first, uint64_t ranks, int avg, const char* what) {
    const Runs v = read(r, Range{Buf::recv, off, cnt});
    size_t pos = 0;
    for (const Run& x : v) {
      // With one rank, dividing by N is the identity: dividing or not are both right.
      const bool avg_ok = x.avg == avg || (n_ == 1 && x.avg <= 1);
      const bool ok = x.index == static_cast<int64_t>(first + pos) && x.ranks == ranks && avg_ok;
      if (!ok) {
        const Run want{x.len, static_cast<int64_t>(first + pos), ranks, 0, avg};
        fail(fmt::format("rank {} recv[{}] ({}) holds {}, expected {}", r, off + pos, what,
                         value_text(x, 0), value_text(want, 0)));
      }
      pos += x.len;
    }
  }

  void check_outputs() {
    const uint64_t all = n_ == 64 ? ~uint64_t{0} : (uint64_t{1} << n_) - 1;
    const int avg = d_.redop == RedOp::avg ? 1 : 0;
    const size_t c = d_.count;
    for (int r = 0; r < n_; ++r) {
      switch (d_.op) {
        case OpType::allreduce: expect(r, 0, c, 0, all, avg, "the reduction"); break;
        case OpType::reducescatter:
          expect(r, 0, c, static_cast<size_t>(r) * c, all, avg, "its chunk of the reduction");
          break;
        case OpType::allgather:
          for (int q = 0; q < n_; ++q) {
            expect(r, static_cast<size_t>(q) * c, c, 0, uint64_t{1} << q, 0, "a gathered block");
          }
          break;
        case OpType::broadcast: expect(r, 0, c, 0, uint64_t{1} << d_.root, 0, "the root's data"); break;
        case OpType::reduce:
          if (r == d_.root) expect(r, 0, c, 0, all, avg, "the reduction");
          break;
        case OpType::barrier:
          if (st(r).know != all) {
            fail(fmt::format("rank {} leaves the barrier without hearing from ranks {}", r,
                             ranks_text(all & ~st(r).know)));
          }
          break;
        default: break;
      }
    }
    if (d_.op == OpType::allreduce) same_expression_everywhere();
  }

  // Floats come out bit-identical only if every rank computed the same expression tree.
  void same_expression_everywhere() {
    const Runs ref = read(0, Range{Buf::recv, 0, d_.count});
    for (int r = 1; r < n_; ++r) {
      const Runs v = read(r, Range{Buf::recv, 0, d_.count});
      size_t a = 0, b = 0, a_used = 0, b_used = 0, pos = 0;
      while (a < ref.size() && b < v.size()) {
        if (ref[a].expr != v[b].expr) {
          fail(fmt::format("rank {} recv[{}] was reduced in another order than on rank 0 "
                           "(floating-point results would differ)",
                           r, pos));
        }
        const size_t len = std::min(ref[a].len - a_used, v[b].len - b_used);
        pos += len;
        a_used += len;
        b_used += len;
        if (a_used == ref[a].len) ++a, a_used = 0;
        if (b_used == v[b].len) ++b, b_used = 0;
      }
    }
  }

  const CollectiveDesc& d_;
  const std::vector<RankSchedule>& s_;
  int n_;
  std::vector<RankState> ranks_;
};

}  // namespace

std::string check_schedules(const CollectiveDesc& desc, const std::vector<RankSchedule>& schedules) {
  try {
    Checker(desc, schedules).run();
  } catch (const Failure& f) {
    return f.what;
  }
  return {};
}

std::string check_algorithm(const std::string& algorithm, const CollectiveDesc& desc) {
  std::vector<RankSchedule> schedules;
  try {
    for (int r = 0; r < desc.nranks; ++r) schedules.push_back(build(algorithm, desc, r));
  } catch (const Error& e) {
    return fmt::format("{} {} N={} count={}: building the schedule failed: {}", algorithm,
                       to_string(desc.op), desc.nranks, desc.count, e.what());
  }
  return check_schedules(desc, schedules);
}

}  // namespace hoop::schedule
