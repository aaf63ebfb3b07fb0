#include "schedule/checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "core/op_traits.h"
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
  uint32_t wepoch = 0; // shared-region schedules: the writer's epoch (its publishes before it, + 1)
  int writer = -1;     // shared-region schedules: the rank that wrote it (-1: the owner, or nobody yet)
};
using Runs = std::vector<Run>;

bool continues(const Run& a, const Run& b) {
  if (a.ranks != b.ranks || a.expr != b.expr || a.avg != b.avg || a.wepoch != b.wepoch || a.writer != b.writer) {
    return false;
  }
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

// One physical buffer of a rank, as runs of symbolic values keyed by their first element.
class Memory {
 public:
  Memory() = default;
  explicit Memory(size_t size) : size_(size) {
    if (size > 0) runs_.emplace(0, Run{size});
  }

  size_t size() const { return size_; }
  Runs all() const { return read(0, size_); }

  Runs read(size_t off, size_t cnt) const {
    Runs out;
    if (cnt == 0) return out;
    auto it = std::prev(runs_.upper_bound(off));
    for (; it != runs_.end() && it->first < off + cnt; ++it) {
      const size_t pos = it->first;
      const Run& r = it->second;
      const size_t lo = std::max(pos, off), hi = std::min(pos + r.len, off + cnt);
      Run piece = r;
      piece.len = hi - lo;
      if (r.index != kUndefined) piece.index = r.index + static_cast<int64_t>(lo - pos);
      append(out, piece);
    }
    return out;
  }

  // Replaces [off, off + total(v)) and merges runs that continue each other at the edges.
  void write(size_t off, const Runs& v) {
    const size_t cnt = total(v);
    if (cnt == 0) return;
    split(off);
    split(off + cnt);
    runs_.erase(runs_.lower_bound(off), runs_.lower_bound(off + cnt));
    size_t pos = off;
    for (const Run& r : v) {
      runs_.emplace(pos, r);
      pos += r.len;
    }
    merge_at(off + cnt);
    for (pos = off + cnt; pos > off;) {  // inside v and at its start
      auto it = std::prev(runs_.lower_bound(pos));
      pos = it->first;
      merge_at(pos);
    }
  }

 private:
  // Makes `at` the start of a run (at <= size).
  void split(size_t at) {
    if (at >= size_) return;
    auto it = std::prev(runs_.upper_bound(at));
    if (it->first == at) return;
    Run& r = it->second;
    Run tail = r;
    const size_t head = at - it->first;
    tail.len = r.len - head;
    if (tail.index != kUndefined) tail.index += static_cast<int64_t>(head);
    r.len = head;
    runs_.emplace(at, tail);
  }

  // Joins the run starting at `at` to the one before it when it continues it.
  void merge_at(size_t at) {
    auto it = runs_.find(at);
    if (it == runs_.end() || it == runs_.begin()) return;
    auto prev = std::prev(it);
    if (!continues(prev->second, it->second)) return;
    prev->second.len += it->second.len;
    runs_.erase(it);
  }

  size_t size_ = 0;
  std::map<size_t, Run> runs_;
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
bool is_region(const Action& a) { return is_region_action(a.kind); }
// Whether the action waits for a peer's flag (a read of this rank's own memory does not).
bool waits(const Action& a, int r) { return a.kind != ActionKind::publish && is_region(a) && a.peer != r; }

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
    case ActionKind::publish: return "publish";
    case ActionKind::wait_flag: return fmt::format("wait for rank {}'s flag {}", a.peer, a.flag);
    case ActionKind::read:
      return fmt::format("read {} from rank {} {} at flag {}", range_text(a.dst), a.peer, range_text(a.remote), a.flag);
    case ActionKind::read_reduce:
      return fmt::format("read-reduce {} = {} op rank {} {} at flag {}", range_text(a.dst), range_text(a.src), a.peer,
                         range_text(a.remote), a.flag);
    case ActionKind::write:
      return fmt::format("write rank {} {} = {} at flag {}", a.peer, range_text(a.remote), range_text(a.src), a.flag);
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
  Checker(const std::vector<CollectiveDesc>& descs, const std::vector<RankSchedule>& s)
      : descs_(descs), d_(descs.front()), s_(s), n_(d_.nranks) {}

  void run() {
    if (n_ < 1 || n_ > kCheckerMaxRanks) {
      fail(fmt::format("the checker handles 1..{} ranks", kCheckerMaxRanks));
    }
    if (is_point_to_point(d_.op)) fail("point-to-point is not modelled");
    if (s_.size() != static_cast<size_t>(n_) || descs_.size() != static_cast<size_t>(n_)) {
      fail(fmt::format("{} schedules and {} calls for {} ranks", s_.size(), descs_.size(), n_));
    }
    for (const CollectiveDesc& d : descs_) {
      if (is_vector_op(d_.op) && !d.blocks) fail("a call of a v-form without its blocks");
    }
    for (const RankSchedule& rs : s_) {
      for (const Step& step : rs.steps) {
        for (const Action& a : step.actions) {
          region_ = region_ || is_region(a);
          remote_writes_ = remote_writes_ || a.kind == ActionKind::write;
        }
      }
    }
    for (int r = 0; r < n_; ++r) setup_rank(r);
    for (int r = 0; r < n_; ++r) check_static(r);
    if (region_) check_closing_publish();
    match();
    simulate();
    if (region_) check_buffers_released();
    check_outputs();
  }

 private:
  // A read of another rank's memory by a rank at an epoch (shared-region schedules).
  struct Access {
    size_t lo = 0, hi = 0;
    int reader = -1;
    uint32_t epoch = 0;
  };

  struct RankState {
    // 0: send, 1: recv, 2: scratch (in place, send or recv may be unused), 3: its region window
    std::vector<Memory> mem;
    View views[4];
    size_t step = 0;
    bool in_step = false;  // the current step was entered (its local actions run)
    size_t cursor = 0;     // a shared-region step: the next action to run
    // Shared-region schedules: the flag (publishes so far), the vector clock (the flag of every
    // rank this one has waited for, transitively), and the clock and knowledge at each publish.
    uint32_t flag = 0;
    std::vector<uint32_t> clock;
    std::vector<std::vector<uint32_t>> clock_at;
    std::vector<uint64_t> know_at;
    std::vector<std::vector<Access>> reads;  // per memory: the peers' reads not yet overwritten
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
    if (has_root(d_.op)) h += fmt::format(" root={}", d_.root);
    if (is_reducing(d_.op)) h += fmt::format(" {}", to_string(d_.redop));
    return h;
  }

  [[noreturn]] void fail(const std::string& what) const { throw Failure{header() + ": " + what}; }

  // A closing publish lets the peers rewrite their windows two operations on once they saw it
  // (transport/shm/region_port.h): every rank must have one, publish as often as the others
  // (the flag value named is the peer's), and only wait after it.
  void check_closing_publish() const {
    int claimed = -1;
    for (int r = 0; r < n_; ++r) {
      if (s_[static_cast<size_t>(r)].closing_publish) claimed = r;
    }
    if (claimed < 0) return;
    size_t publishes_of_claimed = 0;
    for (int r = 0; r < n_; ++r) {
      const RankSchedule& s = s_[static_cast<size_t>(r)];
      if (!s.closing_publish) fail(fmt::format("rank {} claims a closing publish, rank {} does not", claimed, r));
      if (!ends_with_closing_publish(s.steps)) {
        fail(fmt::format("rank {} claims a closing publish but acts after its last publish", r));
      }
      size_t publishes = 0;
      for (const Step& step : s.steps) {
        publishes += static_cast<size_t>(std::count_if(step.actions.begin(), step.actions.end(),
                                                       [](const Action& a) { return a.kind == ActionKind::publish; }));
      }
      if (r == 0) publishes_of_claimed = publishes;
      if (publishes != publishes_of_claimed) {
        fail(fmt::format("rank {} publishes {} times, rank 0 {}: a closing publish names another flag", r, publishes,
                         publishes_of_claimed));
      }
    }
  }

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

  const CollectiveDesc& desc(int r) const { return descs_[static_cast<size_t>(r)]; }
  const BlockLayout& blocks(int r) const { return *desc(r).blocks; }

  // How one rank's send and recv buffers share memory in place (NCCL's conventions, and the
  // same rules for the rest of the collective set, see hoop/communicator.h).
  enum class Alias { none, same, send_in_recv, recv_in_send };

  void setup_rank(int r) {
    ranks_.resize(static_cast<size_t>(n_));
    RankState& rs = st(r);
    const CollectiveDesc& d = desc(r);
    const size_t c = d.count, nc = c * static_cast<size_t>(n_);
    const bool root = r == d.root;
    size_t send_size = 0, recv_size = 0;
    Alias alias = Alias::same;
    size_t alias_at = 0;  // offset of the inner buffer in the outer one
    switch (d_.op) {
      case OpType::allreduce: send_size = c; recv_size = c; break;
      case OpType::reducescatter:
        send_size = nc, recv_size = c, alias = Alias::recv_in_send, alias_at = static_cast<size_t>(r) * c;
        break;
      case OpType::allgather:
        send_size = c, recv_size = nc, alias = Alias::send_in_recv, alias_at = static_cast<size_t>(r) * c;
        break;
      case OpType::broadcast: send_size = root ? c : 0; recv_size = c; break;
      case OpType::reduce: send_size = c; recv_size = root ? c : 0; break;
      case OpType::alltoall: send_size = nc; recv_size = nc; break;
      case OpType::alltoallv:
        send_size = blocks(r).send.extent(), recv_size = blocks(r).recv.extent(), alias = Alias::none;
        break;
      case OpType::gather:
        send_size = c, recv_size = root ? nc : 0, alias = Alias::send_in_recv, alias_at = static_cast<size_t>(r) * c;
        break;
      case OpType::gatherv:
        send_size = c, alias = Alias::send_in_recv;
        if (root) recv_size = blocks(r).recv.extent(), alias_at = blocks(r).recv.displ(r);
        break;
      case OpType::scatter:
        send_size = root ? nc : 0, recv_size = c, alias = Alias::recv_in_send, alias_at = static_cast<size_t>(r) * c;
        break;
      case OpType::scatterv:
        recv_size = c, alias = Alias::recv_in_send;
        if (root) send_size = blocks(r).send.extent(), alias_at = blocks(r).send.displ(r);
        break;
      case OpType::allgatherv:
        send_size = blocks(r).recv.count(r), recv_size = blocks(r).recv.extent(), alias = Alias::send_in_recv;
        alias_at = blocks(r).recv.displ(r);
        break;
      case OpType::reducescatterv:
        send_size = blocks(r).send.total(), recv_size = blocks(r).send.count(r), alias = Alias::recv_in_send;
        alias_at = blocks(r).send.displ(r);
        break;
      default: break;
    }
    rs.mem.assign(4, Memory());
    rs.mem[0] = Memory(send_size);
    rs.mem[1] = Memory(recv_size);
    rs.mem[2] = Memory(s_[static_cast<size_t>(r)].scratch_count);
    rs.mem[3] = Memory(s_[static_cast<size_t>(r)].region_count);
    rs.views[0] = View{0, 0, send_size, false};
    rs.views[1] = View{1, 0, recv_size, true};
    rs.views[2] = View{2, 0, rs.mem[2].size(), true};
    rs.views[3] = View{3, 0, rs.mem[3].size(), true};
    rs.clock.assign(static_cast<size_t>(n_), 0);
    rs.reads.assign(4, {});
    if (send_size > 0) rs.mem[0].write(0, inputs(r, 0, send_size));
    // In place, one buffer serves both roles.
    const bool one_buffer = d.in_place && send_size > 0 && recv_size > 0;
    if (one_buffer) {
      switch (alias) {
        case Alias::recv_in_send:
          // ReduceScatter may use all of its buffer; a Scatter's root keeps its input.
          rs.views[0].writable = d_.op == OpType::reducescatter || d_.op == OpType::reducescatterv;
          rs.views[1] = View{0, alias_at, recv_size, true};
          break;
        case Alias::send_in_recv:
          rs.mem[1].write(alias_at, inputs(r, 0, send_size));
          rs.views[0] = View{1, alias_at, send_size, true};
          break;
        case Alias::same:  // allreduce, alltoall, broadcast and reduce at the root: send == recv
          rs.mem[1].write(0, inputs(r, 0, send_size));
          rs.views[0] = View{1, 0, send_size, true};
          break;
        case Alias::none: fail(fmt::format("rank {}: {} has no in-place form", r, to_string(d_.op)));
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
    RankState& rs = st(r);
    if (!region_) {
      rs.mem[static_cast<size_t>(v.mem)].write(v.base + range.offset, vals);
      return;
    }
    write_shared(r, r, v, range, vals);
  }

  // Shared-region schedules: `writer` writes `range` of `owner`'s memory. Every other rank's
  // read of it (the owner's included) must be ordered before (the reader published after
  // reading, and the writer waited for that), and so must every other rank's write there.
  void write_shared(int writer, int owner, const View& v, const Range& range, const Runs& vals) {
    RankState& ws = st(writer);
    RankState& os = st(owner);
    const size_t lo = v.base + range.offset, hi = lo + total(vals);
    const std::string whose = owner == writer ? std::string() : fmt::format(" of rank {}", owner);
    auto& reads = os.reads[static_cast<size_t>(v.mem)];
    for (const Access& x : reads) {
      if (x.reader != writer && x.lo < hi && lo < x.hi && ws.clock[static_cast<size_t>(x.reader)] < x.epoch) {
        fail_at(writer, ws.step, ws.cursor,
                fmt::format("overwrites {}{} while rank {} may still read it (no flag of rank {} after its read "
                            "is waited for)",
                            range_text(range), whose, x.reader, x.reader));
      }
    }
    if (remote_writes_) {
      for (const Run& x : os.mem[static_cast<size_t>(v.mem)].read(lo, hi - lo)) {
        const int w = x.writer < 0 ? owner : x.writer;
        if (w != writer && ws.clock[static_cast<size_t>(w)] < x.wepoch) {
          fail_at(writer, ws.step, ws.cursor,
                  fmt::format("overwrites {}{} before rank {} published what it wrote there", range_text(range),
                              whose, w));
        }
      }
    }
    std::erase_if(reads, [&](const Access& x) { return lo <= x.lo && x.hi <= hi; });
    Runs stamped = vals;
    for (Run& x : stamped) {
      x.wepoch = ws.flag + 1;
      x.writer = writer;
    }
    os.mem[static_cast<size_t>(v.mem)].write(lo, stamped);
  }

  // A rank reads its own memory (shared-region schedules): what a peer wrote there must have
  // been published, and the read is recorded, for peers that write there later.
  Runs read_local(int r, const Range& range) {
    const Runs v = read(r, range);
    if (!region_) return v;
    RankState& rs = st(r);
    for (const Run& x : v) {
      if (x.writer >= 0 && x.writer != r && rs.clock[static_cast<size_t>(x.writer)] < x.wepoch) {
        fail_at(r, rs.step, rs.cursor,
                fmt::format("reads {} before rank {} published what it wrote there", range_text(range), x.writer));
      }
    }
    const View& w = view(r, range.buf);
    if (remote_writes_ && range.count > 0 && w.mem < 2) {
      rs.reads[static_cast<size_t>(w.mem)].push_back(
          Access{w.base + range.offset, w.base + range.offset + range.count, r, rs.flag + 1});
    }
    return v;
  }

  // Rank r reads `range` of `owner`'s memory: what was written there must have been published
  // (the writer's flag after the write waited for, transitively).
  Runs read_remote(int r, int owner, const Range& range) {
    if (owner == r) return read_local(r, range);
    const Runs v = read(owner, range);
    RankState& rs = st(r);
    for (const Run& x : v) {
      const int w = x.writer < 0 ? owner : x.writer;
      if (w != r && rs.clock[static_cast<size_t>(w)] < x.wepoch) {
        fail_at(r, rs.step, rs.cursor,
                fmt::format("reads {} of rank {} before rank {} published what it wrote there", range_text(range),
                            owner, w));
      }
    }
    const View& w = view(owner, range.buf);
    if (range.count > 0) {
      st(owner).reads[static_cast<size_t>(w.mem)].push_back(
          Access{w.base + range.offset, w.base + range.offset + range.count, r, rs.flag + 1});
    }
    return v;
  }

  // Rank r writes `range` of `owner`'s send or recv buffer (zero copy).
  void write_remote(int r, int owner, const Range& range, const Runs& vals) {
    write_shared(r, owner, view(owner, range.buf), range, vals);
  }

  // At the end: every peer's read of a rank's own buffers, and every peer's write into them,
  // happened before the rank returned (the caller may reuse them at once). Region windows are
  // the transport's to recycle.
  void check_buffers_released() {
    for (int r = 0; r < n_; ++r) {
      const RankState& rs = st(r);
      for (int m = 0; m < 2; ++m) {
        const char* which = m == 0 ? "send" : "recv";
        for (const Access& x : rs.reads[static_cast<size_t>(m)]) {
          if (x.reader != r && rs.clock[static_cast<size_t>(x.reader)] < x.epoch) {
            fail(fmt::format("rank {} returns while rank {} may still read its {} buffer", r, x.reader, which));
          }
        }
        for (const Run& x : remote_writes_ ? rs.mem[static_cast<size_t>(m)].all() : Runs{}) {
          if (x.writer >= 0 && x.writer != r && rs.clock[static_cast<size_t>(x.writer)] < x.wepoch) {
            fail(fmt::format("rank {} returns while rank {} may still write its {} buffer", r, x.writer, which));
          }
        }
      }
    }
  }

  // ---- static checks of one rank's schedule

  // `owner`: whose buffer the range names (-1: rank r's).
  void check_range(int r, size_t k, size_t i, const Range& range, bool writes, int owner = -1) {
    const View& v = view(owner < 0 ? r : owner, range.buf);
    if (range.offset > v.size || range.count > v.size - range.offset) {
      fail_at(r, k, i, fmt::format("{} is outside the {} buffer of {} elements{}", range_text(range),
                                   buf_name(range.buf), v.size,
                                   owner >= 0 && owner != r ? fmt::format(" of rank {}", owner) : ""));
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
      const bool transfers = std::any_of(acts.begin(), acts.end(), is_transfer);
      for (size_t i = 0; i < acts.size(); ++i) {
        const Action& a = acts[i];
        if (is_region(a)) {
          check_region_action(r, k, i, a, transfers);
          continue;
        }
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
          default: break;
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

  void check_region_action(int r, size_t k, size_t i, const Action& a, bool step_has_transfers) {
    if (step_has_transfers) fail_at(r, k, i, "a step mixes shared-region actions with sends and receives");
    if (a.kind == ActionKind::publish) return;
    if (a.peer < 0 || a.peer >= n_) fail_at(r, k, i, "invalid peer");
    if (a.kind == ActionKind::wait_flag) {
      if (a.peer == r) fail_at(r, k, i, "waits for its own flag");
      if (a.flag == 0) fail_at(r, k, i, "waits for flag 0 (nothing)");
      return;
    }
    if (a.kind == ActionKind::write) {
      if (a.peer == r) fail_at(r, k, i, "writes its own memory as a peer's (a local copy does that)");
      if (a.flag == 0) fail_at(r, k, i, "writes a peer's memory without waiting for its flag");
      if (a.remote.buf != Buf::send && a.remote.buf != Buf::recv) fail_at(r, k, i, "writes a peer's memory other than its buffers");
      check_range(r, k, i, a.remote, true, a.peer);
      check_range(r, k, i, a.src, false);
      if (a.remote.count != a.src.count) fail_at(r, k, i, "source and destination differ in size");
      return;
    }
    if (a.peer == r && a.flag != 0) fail_at(r, k, i, "reads its own memory at a flag");
    if (a.peer != r && a.flag == 0) fail_at(r, k, i, "reads a peer's memory without waiting for its flag");
    if (a.peer != r && a.remote.buf == Buf::scratch) fail_at(r, k, i, "reads a peer's scratch");
    check_range(r, k, i, a.remote, false, a.peer);
    check_range(r, k, i, a.dst, true);
    if (a.remote.count != a.dst.count) fail_at(r, k, i, "source and destination differ in size");
    if (a.kind == ActionKind::read_reduce) {
      check_range(r, k, i, a.src, false);
      if (a.src.count != a.dst.count) fail_at(r, k, i, "source and destination differ in size");
      const Span s = span(r, a.src), t = span(r, a.dst);
      if (s.overlaps(t) && s.lo != t.lo) fail_at(r, k, i, "reduces from a range that partly overlaps its destination");
    }
    if (a.peer == r) {
      const Span s = span(r, a.remote), t = span(r, a.dst);
      if (s.overlaps(t) && s.lo != t.lo) fail_at(r, k, i, "reads from a range that partly overlaps its destination");
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
    // Messages per (from, to, channel) in program order, bucketed in one flat array per side.
    const int nch = std::max(1, d_.nchannels);
    const size_t nkeys = static_cast<size_t>(n_) * static_cast<size_t>(n_) * static_cast<size_t>(nch);
    auto key = [&](int from, int to, int ch) {
      return (static_cast<size_t>(from) * static_cast<size_t>(n_) + static_cast<size_t>(to)) *
                 static_cast<size_t>(nch) + static_cast<size_t>(ch);
    };
    // Kept between calls: the checker runs thousands of times in a row and fresh large
    // vectors would cost a page fault per page each time.
    thread_local std::vector<size_t> send_start, recv_start, send_fill, recv_fill;
    thread_local std::vector<Ref> sends, recvs;
    send_start.assign(nkeys + 1, 0);
    recv_start.assign(nkeys + 1, 0);
    auto for_each_transfer = [&](auto&& fn) {
      for (int r = 0; r < n_; ++r) {
        for (size_t k = 0; k < steps(r).size(); ++k) {
          const auto& acts = steps(r)[k].actions;
          for (size_t i = 0; i < acts.size(); ++i) {
            const Action& a = acts[i];
            if (a.kind == ActionKind::send) fn(true, key(r, a.peer, a.channel), Ref{r, k, i});
            if (is_recv(a)) fn(false, key(a.peer, r, a.channel), Ref{r, k, i});
          }
        }
      }
    };
    for_each_transfer([&](bool is_send, size_t kk, const Ref&) { ++(is_send ? send_start : recv_start)[kk + 1]; });
    for (size_t kk = 0; kk < nkeys; ++kk) {
      send_start[kk + 1] += send_start[kk];
      recv_start[kk + 1] += recv_start[kk];
    }
    sends.resize(send_start[nkeys]);
    recvs.resize(recv_start[nkeys]);
    send_fill.assign(send_start.begin(), send_start.end() - 1);
    recv_fill.assign(recv_start.begin(), recv_start.end() - 1);
    for_each_transfer([&](bool is_send, size_t kk, const Ref& ref) {
      if (is_send) sends[send_fill[kk]++] = ref;
      else recvs[recv_fill[kk]++] = ref;
    });
    auto count_of = [&](const Ref& x) {
      const Action& a = action(x.rank, x.step, x.idx);
      return a.kind == ActionKind::send ? a.src.count : a.dst.count;
    };
    for (size_t kk = 0; kk < nkeys; ++kk) {
      const size_t ns = send_start[kk + 1] - send_start[kk], nr = recv_start[kk + 1] - recv_start[kk];
      if (ns == 0 && nr == 0) continue;
      const int ch = static_cast<int>(kk % static_cast<size_t>(nch));
      const int to = static_cast<int>(kk / static_cast<size_t>(nch) % static_cast<size_t>(n_));
      const int from = static_cast<int>(kk / static_cast<size_t>(nch) / static_cast<size_t>(n_));
      for (size_t m = 0; m < std::min(ns, nr); ++m) {
        const Ref& s = sends[send_start[kk] + m];
        const Ref& t = recvs[recv_start[kk] + m];
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
      if (ns > nr) {
        const Ref& s = sends[send_start[kk] + nr];
        fail_at(s.rank, s.step, s.idx,
                fmt::format("message {} from rank {} to rank {} (channel {}) is never received: "
                            "rank {} receives {} message(s) from it",
                            nr, from, to, ch, to, nr));
      }
      if (nr > ns) {
        const Ref& t = recvs[recv_start[kk] + ns];
        fail_at(t.rank, t.step, t.idx,
                fmt::format("waits for message {} from rank {}, which sends only {} to rank {}", ns,
                            from, ns, to));
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
      const Span s = span(r, a.src), t = span(r, a.dst);
      if (region_ && s.mem == t.mem && s.lo == t.lo) return;  // in place: nothing moves (nor is written)
      write(r, a.dst, read_local(r, a.src));
    } else if (a.kind == ActionKind::finish_avg) {
      Runs v = read_local(r, a.dst);
      for (Run& x : v) {
        if (x.index == kUndefined) fail_at(r, k, i, "divides undefined data");
        ++x.avg;
        x.expr = avg_expr(x.expr);
      }
      write(r, a.dst, v);
    }
  }

  bool region_step(int r, size_t k) const {
    const auto& acts = steps(r)[k].actions;
    return std::any_of(acts.begin(), acts.end(), is_region);
  }

  // Runs one shared-region action (its wait satisfied).
  void run_region(int r, size_t k, size_t i) {
    const Action& a = action(r, k, i);
    RankState& rs = st(r);
    if (a.kind == ActionKind::publish) {
      rs.clock[static_cast<size_t>(r)] = ++rs.flag;
      rs.clock_at.push_back(rs.clock);
      rs.know_at.push_back(rs.know);
      return;
    }
    if (!is_region(a)) {
      run_local(r, k, i);
      return;
    }
    if (waits(a, r)) {
      const RankState& ps = st(a.peer);
      const auto& theirs = ps.clock_at[a.flag - 1];
      for (size_t q = 0; q < rs.clock.size(); ++q) rs.clock[q] = std::max(rs.clock[q], theirs[q]);
      rs.know |= ps.know_at[a.flag - 1];
    }
    if (a.kind == ActionKind::read) {
      write(r, a.dst, read_remote(r, a.peer, a.remote));
    } else if (a.kind == ActionKind::read_reduce) {
      const Runs theirs = read_remote(r, a.peer, a.remote);
      write(r, a.dst, reduce(r, k, i, read_local(r, a.src), theirs));
    } else if (a.kind == ActionKind::write) {
      write_remote(r, a.peer, a.remote, read_local(r, a.src));
    }
  }

  // Runs a shared-region step's actions in order until one waits for a flag not yet raised.
  // Returns whether the step is complete.
  bool advance_region(int r) {
    RankState& rs = st(r);
    const auto& acts = steps(r)[rs.step].actions;
    for (; rs.cursor < acts.size(); ++rs.cursor) {
      const Action& a = acts[rs.cursor];
      if (waits(a, r) && st(a.peer).flag < a.flag) return false;
      run_region(r, rs.step, rs.cursor);
    }
    return true;
  }

  // Starts this rank's next steps until one has transfers (or a flag) to wait for.
  void enter(int r) {
    RankState& rs = st(r);
    while (rs.step < steps(r).size()) {
      const auto& acts = steps(r)[rs.step].actions;
      const bool region = region_ && region_step(r, rs.step);
      if (!rs.in_step) {
        rs.in_step = true;
        rs.cursor = 0;
        rs.done.assign(acts.size(), false);
        rs.delivered.assign(acts.size(), 0);
        rs.know_at_step = rs.know;
        rs.pending = 0;
        if (!region) {
          for (size_t i = 0; i < acts.size(); ++i) {
            if (is_transfer(acts[i])) {
              ++rs.pending;
            } else {
              run_local(r, rs.step, i);
              rs.done[i] = true;
            }
          }
        }
      }
      if (region ? !advance_region(r) : rs.pending > 0) return;
      ++rs.step;
      rs.in_step = false;
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
      rs.in_step = false;
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
      for (int r = 0; region_ && r < n_; ++r) {
        if (finished(r) || !region_step(r, st(r).step)) continue;
        const size_t step = st(r).step, cursor = st(r).cursor;
        enter(r);
        if (st(r).step != step || st(r).cursor != cursor) progress = true;
      }
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
      if (region_ && region_step(r, k)) {
        const Action& a = acts[st(r).cursor];
        waiting += fmt::format("\n  rank {} step {} action {} ({}) waits for rank {}'s flag {} (it raised {})", r, k,
                               st(r).cursor, action_text(a), a.peer, a.flag, st(a.peer).flag);
        continue;
      }
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

  // Elements of rank r's recv outside `blocks` must not have been written.
  void expect_untouched(int r, const Blocks& blocks) {
    std::vector<std::pair<size_t, size_t>> covered;
    for (int q = 0; q < n_; ++q) covered.emplace_back(blocks.displ(q), blocks.displ(q) + blocks.count(q));
    std::sort(covered.begin(), covered.end());
    size_t at = 0;
    auto gap = [&](size_t lo, size_t hi) {
      size_t pos = lo;
      for (const Run& x : read(r, Range{Buf::recv, lo, hi - lo})) {
        if (x.index != kUndefined) {
          fail(fmt::format("rank {} recv[{}] lies outside every block but holds {}", r, pos, value_text(x, 0)));
        }
        pos += x.len;
      }
    };
    for (const auto& [lo, hi] : covered) {
      if (lo > at) gap(at, lo);
      at = std::max(at, hi);
    }
    if (view(r, Buf::recv).size > at) gap(at, view(r, Buf::recv).size);
  }

  // Block q of rank r's recv, per the blocks of its call, is `first`.. of rank `from`'s input.
  void expect_block(int r, const Blocks& out, int q, size_t first, int from, size_t want_count) {
    if (out.count(q) != want_count) {
      fail(fmt::format("rank {} expects {} elements from rank {}, which sends {}: the calls do not match", r,
                       out.count(q), q, want_count));
    }
    expect(r, out.displ(q), out.count(q), first, uint64_t{1} << from, 0,
           fmt::format("the block of rank {}", q).c_str());
  }

  void check_outputs() {
    const uint64_t all = n_ == 64 ? ~uint64_t{0} : (uint64_t{1} << n_) - 1;
    const int avg = d_.redop == RedOp::avg ? 1 : 0;
    const size_t c = d_.count;
    const int root = d_.root;
    for (int r = 0; r < n_; ++r) {
      const Blocks uniform = Blocks::uniform(desc(r).count, n_);
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
        case OpType::broadcast: expect(r, 0, c, 0, uint64_t{1} << root, 0, "the root's data"); break;
        case OpType::reduce:
          if (r == root) expect(r, 0, c, 0, all, avg, "the reduction");
          break;
        case OpType::barrier:
          if (st(r).know != all) {
            fail(fmt::format("rank {} leaves the barrier without hearing from ranks {}", r,
                             ranks_text(all & ~st(r).know)));
          }
          break;
        case OpType::alltoall:
          for (int q = 0; q < n_; ++q) expect_block(r, uniform, q, static_cast<size_t>(r) * c, q, c);
          break;
        case OpType::alltoallv:
          for (int q = 0; q < n_; ++q) {
            const Blocks& theirs = blocks(q).send;
            expect_block(r, blocks(r).recv, q, theirs.displ(r), q, theirs.count(r));
          }
          expect_untouched(r, blocks(r).recv);
          break;
        case OpType::gather:
        case OpType::gatherv:
          if (r != root) break;
          for (int q = 0; q < n_; ++q) {
            expect_block(r, d_.op == OpType::gather ? uniform : blocks(r).recv, q, 0, q, desc(q).count);
          }
          if (d_.op == OpType::gatherv) expect_untouched(r, blocks(r).recv);
          break;
        case OpType::scatter:
        case OpType::scatterv: {
          const Blocks& in = d_.op == OpType::scatter ? Blocks::uniform(desc(root).count, n_) : blocks(root).send;
          if (in.count(r) != desc(r).count) {
            fail(fmt::format("the root sends {} elements to rank {}, which expects {}: the calls do not match",
                             in.count(r), r, desc(r).count));
          }
          expect(r, 0, desc(r).count, in.displ(r), uint64_t{1} << root, 0, "its block of the root's data");
          break;
        }
        case OpType::allgatherv:
          for (int q = 0; q < n_; ++q) expect_block(r, blocks(r).recv, q, 0, q, blocks(q).recv.count(q));
          expect_untouched(r, blocks(r).recv);
          break;
        case OpType::reducescatterv: {
          const Blocks& in = blocks(r).send;
          expect(r, 0, in.count(r), in.displ(r), all, avg, "its block of the reduction");
          break;
        }
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

  const std::vector<CollectiveDesc>& descs_;
  const CollectiveDesc& d_;  // what every rank's call shares: op, N, root, redop, channels
  const std::vector<RankSchedule>& s_;
  int n_;
  std::vector<RankState> ranks_;
  bool region_ = false;  // some schedule uses the shared region
  // Some schedule writes into a peer's buffers (zero copy): only then can memory hold what
  // another rank wrote, and must a rank's reads of its own buffers be tracked for the writers.
  bool remote_writes_ = false;
};

}  // namespace

std::string check_schedules(const std::vector<CollectiveDesc>& descs, const std::vector<RankSchedule>& schedules) {
  if (descs.empty()) return "no calls to check";
  // A branch goes the same way on every rank, decided by what all ranks' calls are like.
  const bool branches = std::any_of(schedules.begin(), schedules.end(),
                                    [](const RankSchedule& s) { return s.branch != BranchRule::none; });
  std::vector<RankSchedule> taken;
  if (branches) {
    const bool any_in_place =
        std::any_of(descs.begin(), descs.end(), [](const CollectiveDesc& d) { return d.in_place; });
    const bool all_registered =
        std::all_of(descs.begin(), descs.end(), [](const CollectiveDesc& d) { return d.registered; });
    for (const RankSchedule& s : schedules) {
      taken.push_back(with_variant(s, branch_variant(s.branch, any_in_place, all_registered)));
    }
  }
  try {
    Checker(descs, branches ? taken : schedules).run();
  } catch (const Failure& f) {
    return f.what;
  }
  return {};
}

std::string check_schedules(const CollectiveDesc& desc, const std::vector<RankSchedule>& schedules) {
  return check_schedules(std::vector<CollectiveDesc>(static_cast<size_t>(std::max(desc.nranks, 1)), desc), schedules);
}

std::string check_algorithm(const std::string& algorithm, const std::vector<CollectiveDesc>& descs) {
  std::vector<RankSchedule> schedules;
  try {
    for (size_t r = 0; r < descs.size(); ++r) schedules.push_back(build(algorithm, descs[r], static_cast<int>(r)));
  } catch (const Error& e) {
    const CollectiveDesc& d = descs.front();
    return fmt::format("{} {} N={} count={}: building the schedule failed: {}", algorithm, to_string(d.op),
                       d.nranks, d.count, e.what());
  }
  return check_schedules(descs, schedules);
}

std::string check_algorithm(const std::string& algorithm, const CollectiveDesc& desc) {
  return check_algorithm(algorithm, std::vector<CollectiveDesc>(static_cast<size_t>(std::max(desc.nranks, 1)), desc));
}

}  // namespace hoop::schedule
