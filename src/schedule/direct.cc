// shm-direct as schedules: the ranks of one host exchange through a shared region, one-sided.
// Each rank copies its input into its window (or publishes where its own buffers are), raises
// its flag, and reads or reduces what it needs from its peers' windows or buffers once their
// flags say it is there; flags also say when a window may be rewritten. Every rank raises its
// flag in the same sequence, so the value naming a peer's event is this rank's own for it.
//
//  - cells (inputs up to RegionShape::cell_elements): every rank copies its input into its
//    window and reduces (or copies) every window itself, in rank order, so all ranks compute
//    the same bits; one flag: the input is published.
//  - slots (larger inputs): pipelined chunks through `stages` slots per rank. AllReduce and
//    Reduce: each rank copies a chunk into its slot except the part it reduces itself (in), reduces
//    its part reading every slot in rank order into its scratch and leaves the result in its
//    slot (reduced), then copies the others' parts out (done); ReduceScatter: block p of every
//    input goes to rank p, a chunk holding the same sub-range of every block (AllToAll too,
//    copied out instead of reduced); AllGather and Broadcast: in, then copies out. A slot
//    stage is rewritten only once every peer is done with the chunk that used it before.
//  - single copy (RegionShape::single_copy_*): every rank publishes its buffers and reads the
//    peers' own buffers (process_vm_readv, or in place where they are registered), no slot in
//    between; before returning, a rank whose buffers are read waits until every reader is done.
// Across operations the region transport alternates windows (a window is rewritten only once
// every peer finished the operation before the last): one operation's schedule starts fresh.
#include <algorithm>
#include <functional>

#include "core/errors.h"
#include "schedule/schedule_builders.h"

namespace hoop::schedule {

RegionShape RegionShape::defaults() {
  RegionShape s;
  s.cell_elements = 64;
  s.chunk_elements = 32768;
  s.stages = 2;
  s.align_elements = 16;
  s.zero_copy_piece_elements = 8192;
  s.stream_elements = 1 << 20;
  return s;
}

namespace {

struct Part {
  size_t lo = 0, hi = 0;
  size_t count() const { return hi - lo; }
};

// The part of a chunk of `len` elements that rank p reduces when N ranks split it: [lo, hi), cut
// at multiples of `align` (the last parts may be short or empty).
Part part_of(size_t len, int p, int nranks, size_t align) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t a = std::max<size_t>(align, 1);
  const size_t per = (len + n - 1) / n;
  const size_t rounded = (per + a - 1) / a * a;
  const size_t lo = std::min(len, rounded * static_cast<size_t>(p));
  return {lo, std::min(len, lo + rounded)};
}

// Where one rank's input to a reduction is: a range of `peer`'s buffers readable at `flag`.
struct Source {
  int peer;
  uint32_t flag;
  Range remote;
};

class DirectBuilder {
 public:
  DirectBuilder(const CollectiveDesc& d, int rank)
      : d_(d), me_(rank), n_(d.nranks), shape_(d.region.chunk_elements > 0 ? d.region : RegionShape::defaults()) {
    s_.algorithm = kDirectAlgorithm;
    shape_.stages = std::max<size_t>(shape_.stages, 1);
    shape_.chunk_elements = std::max<size_t>(shape_.chunk_elements, 1);
  }

  RankSchedule build() {
    s_.shared_region = n_ > 1;
    const bool through_cells = n_ > 1 && input_elements() <= shape_.cell_elements;
    if (n_ == 1) {
      alone();
    } else if (through_cells) {
      cells();
    } else if (registered_branch()) {
      registered_or_not();
    } else if (single_copy()) {
      switch (d_.op) {
        case OpType::allreduce: single_copy_allreduce(publish_buffers()); break;
        case OpType::reducescatter: single_copy_reducescatter(); break;
        case OpType::allgather: single_copy_allgather(); break;
        case OpType::alltoall: single_copy_alltoall(); break;
        default: single_copy_broadcast(); break;
      }
    } else {
      switch (d_.op) {
        case OpType::allreduce: slots_allreduce(false); break;
        case OpType::reduce: slots_allreduce(true); break;
        case OpType::reducescatter: slots_reducescatter(); break;
        case OpType::allgather: slots_allgather(); break;
        case OpType::broadcast: slots_broadcast(); break;
        case OpType::alltoall: slots_alltoall(); break;
        default: unsupported();
      }
    }
    // Slots, single and zero copy end with a "done" publish on every rank (then at most waits
    // for the peers that read this rank's buffers); cells end with reads, but for Broadcast
    // when the shape says (RegionShape::broadcast_cells_done).
    // With variants, they end the schedule.
    s_.closing_publish = s_.shared_region && (!through_cells || broadcast_cells_close()) &&
                         (s_.variants.empty() ? ends_with_closing_publish(s_.steps)
                                              : std::all_of(s_.variants.begin(), s_.variants.end(), ends_with_closing_publish));
    return std::move(s_);
  }

 private:
  [[noreturn]] void unsupported() const {
    throw_error(ErrorCode::invalid_argument,
                fmt::format("{} does not implement {}", kDirectAlgorithm, to_string(d_.op)));
  }

  // Broadcast's cells end with a closing "done" publish (RegionShape::broadcast_cells_done).
  bool broadcast_cells_close() const { return d_.op == OpType::broadcast && shape_.broadcast_cells_done; }

  size_t input_elements() const {
    switch (d_.op) {
      case OpType::reducescatter:
      case OpType::alltoall: return d_.count * static_cast<size_t>(n_);
      case OpType::barrier: return 0;
      case OpType::allreduce:
      case OpType::allgather:
      case OpType::broadcast:
      case OpType::reduce: return d_.count;
      default: unsupported();
    }
  }

  // AllReduce and Reduce large enough to decide at run time whether every rank's buffers are
  // registered (zero copy).
  bool registered_branch() const {
    return shape_.registered_elements > 0 && (d_.op == OpType::allreduce || d_.op == OpType::reduce) &&
           d_.count >= shape_.registered_elements;
  }

  // Which calls read the peers' own buffers. Not from whether this rank works in place: ranks
  // may differ there, and all must take one path.
  bool single_copy() const {
    const size_t at_least = shape_.single_copy_elements;
    const size_t c = d_.count, n = static_cast<size_t>(n_);
    if (d_.op == OpType::alltoall) return shape_.single_copy_alltoall_elements > 0 && c * n >= shape_.single_copy_alltoall_elements;
    if (at_least == 0) return false;
    switch (d_.op) {
      case OpType::allreduce: return c >= std::max(at_least, shape_.single_copy_allreduce_elements);
      case OpType::broadcast: return c >= at_least;
      case OpType::reducescatter: return c * n >= at_least;
      case OpType::allgather: return c * n >= std::max(at_least, shape_.single_copy_allgather_elements);
      default: return false;  // Reduce: non-roots have no output to leave their part in
    }
  }

  void step() { s_.steps.emplace_back(); }
  void add(const Action& a) {
    if (s_.steps.empty()) step();
    s_.steps.back().actions.push_back(a);
  }
  uint32_t raise() {
    add(publish());
    return ++flag_;
  }
  void copy(Range src, Range dst) {
    if (src.count > 0) add(local_copy(src, dst));
  }
  // Outputs from RegionShape::stream_elements are stored around the caches where this rank
  // copies them itself (zero copy's results; single copy's reads of a peer's registered buffer
  // and its own block): the caches keep the inputs being read, and no output line is read
  // before it is written.
  bool stream_output() const {
    const bool blocks = d_.op == OpType::allgather || d_.op == OpType::alltoall;
    const size_t out = blocks ? d_.count * static_cast<size_t>(n_) : d_.count;
    return shape_.stream_elements > 0 && out >= shape_.stream_elements;
  }
  void copy_out(Range src, Range dst) {
    if (src.count == 0) return;
    Action a = local_copy(src, dst);
    a.stream = stream_output();
    add(a);
  }
  void read_out(int peer, uint32_t flag, Range remote, Range dst) {
    Action a = read_from(peer, flag, remote, dst);
    a.stream = stream_output();
    add(a);
  }
  void wait_all(uint32_t flag) {
    for (int p = 0; p < n_; ++p)
      if (p != me_) add(wait_flag(p, flag));
  }

  // dst = input(0) op input(1) op ... op input(N-1), partial results in `partial` (which may be
  // dst), then the average's division: the same expression wherever it is computed. When the
  // first input is this rank's own, the second is reduced with it where it is: no copy of it
  // into `partial` first (a whole pass over the part when the second comes through the kernel).
  void reduce_in_rank_order(Range dst, Range partial, const std::function<Source(int)>& input) {
    Range first = partial;
    for (int q = 0; q < n_; ++q) {
      const Source in = input(q);
      const Range out = q == n_ - 1 ? dst : partial;
      if (q == 0 && in.peer == me_ && n_ > 1) {
        first = in.remote;
      } else if (q == 0) {
        add(read_from(in.peer, in.flag, in.remote, partial));
      } else {
        add(read_reduce_from(in.peer, in.flag, in.remote, q == 1 ? first : partial, out));
      }
    }
    if (d_.redop == RedOp::avg) add(finish_avg(dst));
  }

  // One rank: the result is the input (an average of one is the value itself).
  void alone() {
    const size_t c = d_.count;
    if (d_.op == OpType::barrier) return;
    step();
    copy(Range{Buf::send, 0, c}, Range{Buf::recv, 0, c});
  }

  // ---- cells

  void cells() {
    const size_t c = d_.count, in = input_elements();
    const size_t me = static_cast<size_t>(me_);
    s_.region_count = in;
    // A broadcast's non-roots publish without data, so that a rank that names another root
    // finds out instead of waiting for a window nobody fills.
    step();
    if (d_.op != OpType::broadcast || me_ == d_.root) copy(Range{Buf::send, 0, in}, Range{Buf::region, 0, in});
    const uint32_t in_flag = raise();
    step();
    const auto cell = [&](size_t offset) {
      return [this, offset, c, in_flag](int q) {
        return Source{q, q == me_ ? 0u : in_flag, Range{Buf::region, offset, c}};
      };
    };
    switch (d_.op) {
      case OpType::allreduce:
        if (c > 0) reduce_in_rank_order(Range{Buf::recv, 0, c}, Range{Buf::recv, 0, c}, cell(0));
        break;
      case OpType::reduce:
        if (c > 0 && me_ == d_.root) reduce_in_rank_order(Range{Buf::recv, 0, c}, Range{Buf::recv, 0, c}, cell(0));
        break;
      case OpType::reducescatter:
        if (c > 0) reduce_in_rank_order(Range{Buf::recv, 0, c}, Range{Buf::recv, 0, c}, cell(me * c));
        break;
      case OpType::allgather:
        for (int p = 0; p < n_; ++p) {
          const Range dst{Buf::recv, static_cast<size_t>(p) * c, c};
          if (p == me_) copy(Range{Buf::send, 0, c}, dst);
          else add(read_from(p, in_flag, Range{Buf::region, 0, c}, dst));
        }
        break;
      case OpType::alltoall:
        // The whole input is in the window before any peer's is read: in place is safe.
        for (int p = 0; p < n_; ++p) {
          const Range dst{Buf::recv, static_cast<size_t>(p) * c, c};
          if (p == me_) copy(Range{Buf::send, me * c, c}, dst);
          else add(read_from(p, in_flag, Range{Buf::region, me * c, c}, dst));
        }
        break;
      case OpType::broadcast:
        if (me_ == d_.root) copy(Range{Buf::send, 0, c}, Range{Buf::recv, 0, c});
        else add(read_from(d_.root, in_flag, Range{Buf::region, 0, c}, Range{Buf::recv, 0, c}));
        if (broadcast_cells_close()) raise();
        break;
      case OpType::barrier:
        // Everyone published on entering: once every flag is seen, everyone entered.
        wait_all(in_flag);
        break;
      default: unsupported();
    }
    // No other "done reading" flag: the transport rewrites a window only once every peer
    // started the next operation (which ends its reads).
  }

  // ---- slots

  size_t chunks_of(size_t count, size_t per) const { return (count + per - 1) / per; }
  Range slot(size_t k, size_t offset, size_t count) const {
    return Range{Buf::region, (k % shape_.stages) * shape_.chunk_elements + offset, count};
  }
  // Before chunk k rewrites its stage: every peer is done with chunk k - stages.
  void wait_stage_free(size_t k) {
    if (k >= shape_.stages) wait_all(done_[k - shape_.stages]);
  }
  void begin_chunks(size_t n) {
    in_.assign(n, 0);
    reduced_.assign(n, 0);
    done_.assign(n, 0);
    s_.region_count = shape_.stages * shape_.chunk_elements;
  }

  // AllReduce (and Reduce when only the root gets the result).
  void slots_allreduce(bool only_root_gets_result) {
    const size_t c = d_.count, chunk = shape_.chunk_elements, align = shape_.align_elements;
    const size_t nk = chunks_of(c, chunk);
    const bool gets_result = !only_root_gets_result || me_ == d_.root;
    begin_chunks(nk);
    s_.scratch_count = part_of(std::min(c, chunk), 0, n_, align).count();
    const auto len = [&](size_t k) { return std::min(chunk, c - k * chunk); };
    const auto copy_in = [&](size_t k) {
      step();
      wait_stage_free(k);
      const Part own = part_of(len(k), me_, n_, align);
      const size_t base = k * chunk;
      copy(Range{Buf::send, base, own.lo}, slot(k, 0, own.lo));
      copy(Range{Buf::send, base + own.hi, len(k) - own.hi}, slot(k, own.hi, len(k) - own.hi));
      in_[k] = raise();
    };
    const auto reduce_own = [&](size_t k) {
      step();
      const Part own = part_of(len(k), me_, n_, align);
      if (own.count() > 0) {
        const size_t at = k * chunk + own.lo;
        // Reduced in private memory, then copied out: the kernel's own stores into slot lines a
        // peer read last (shared with its cache) made the whole AllReduce 1.1-1.25x slower.
        const Range acc{Buf::scratch, 0, own.count()};
        reduce_in_rank_order(acc, acc, [&](int q) {
          return q == me_ ? Source{me_, 0, Range{Buf::send, at, own.count()}}
                          : Source{q, in_[k], slot(k, own.lo, own.count())};
        });
        copy(acc, slot(k, own.lo, own.count()));
        if (gets_result) copy(acc, Range{Buf::recv, at, own.count()});
      }
      reduced_[k] = raise();
    };
    const auto copy_out = [&](size_t k) {
      step();
      if (gets_result) {
        for (int p = 0; p < n_; ++p) {
          const Part part = part_of(len(k), p, n_, align);
          if (p == me_ || part.count() == 0) continue;
          add(read_from(p, reduced_[k], slot(k, part.lo, part.count()),
                        Range{Buf::recv, k * chunk + part.lo, part.count()}));
        }
      }
      done_[k] = raise();
    };
    // With two or more stages the next chunk is copied in between reducing this one and
    // collecting the peers' parts, which hides how far apart the ranks finish their reductions.
    const size_t stages = shape_.stages;
    copy_in(0);
    for (size_t k = 0; k < nk; ++k) {
      reduce_own(k);
      if (stages > 1 && k + 1 < nk) copy_in(k + 1);
      copy_out(k);
      if (stages == 1 && k + 1 < nk) copy_in(k + 1);
    }
  }

  // ReduceScatter and AllToAll: a chunk holds the same sub-range of every block, block p at
  // p * per of the stage.
  struct BlockChunks {
    size_t per, stage_elements, chunks, count;
    size_t len(size_t k) const { return std::min(per, count - k * per); }
  };
  BlockChunks begin_block_chunks() {
    const size_t n = static_cast<size_t>(n_);
    const size_t align = std::max<size_t>(shape_.align_elements, 1);
    size_t per = shape_.chunk_elements / n;
    if (per >= align) per = per / align * align;
    per = std::max<size_t>(per, 1);
    const BlockChunks b{per, std::max(shape_.chunk_elements, per * n), chunks_of(d_.count, per), d_.count};
    begin_chunks(b.chunks);
    s_.region_count = shape_.stages * b.stage_elements;
    return b;
  }
  Range block_stage(const BlockChunks& b, size_t k, size_t offset, size_t count) const {
    return Range{Buf::region, (k % shape_.stages) * b.stage_elements + offset, count};
  }
  // Chunk k of every block but the own one into the stage, published.
  void copy_blocks_in(const BlockChunks& b, size_t k) {
    step();
    wait_stage_free(k);
    const size_t c = d_.count, per = b.per;
    for (size_t p = 0; p < static_cast<size_t>(n_); ++p)
      if (p != static_cast<size_t>(me_)) copy(Range{Buf::send, p * c + k * per, b.len(k)}, block_stage(b, k, p * per, b.len(k)));
    in_[k] = raise();
  }

  void slots_reducescatter() {
    const size_t me = static_cast<size_t>(me_);
    const BlockChunks b = begin_block_chunks();
    const size_t c = d_.count, per = b.per;
    const auto reduce_own = [&](size_t k) {
      step();
      const size_t len = b.len(k);
      const Range out{Buf::recv, k * per, len};
      // In place the output is the own input block: reduce into the free own part of the slot.
      const Range dst = d_.in_place ? block_stage(b, k, me * per, len) : out;
      reduce_in_rank_order(dst, dst, [&](int q) {
        return q == me_ ? Source{me_, 0, Range{Buf::send, me * c + k * per, len}}
                        : Source{q, in_[k], block_stage(b, k, me * per, len)};
      });
      if (d_.in_place) copy(dst, out);
      done_[k] = raise();
    };
    copy_blocks_in(b, 0);
    for (size_t k = 0; k < b.chunks; ++k) {
      reduce_own(k);
      if (k + 1 < b.chunks) copy_blocks_in(b, k + 1);
    }
  }

  // AllToAll: block p of every input goes to rank p, a chunk holding the same sub-range of
  // every block (block p at p * per). In place, chunk k of every block is in the slot before
  // the peers' chunk k overwrites it.
  void slots_alltoall() {
    const size_t me = static_cast<size_t>(me_);
    const BlockChunks b = begin_block_chunks();
    const size_t c = d_.count, per = b.per;
    const auto copy_out = [&](size_t k) {
      step();
      const size_t len = b.len(k);
      copy(Range{Buf::send, me * c + k * per, len}, Range{Buf::recv, me * c + k * per, len});
      for (int p = 0; p < n_; ++p) {
        if (p == me_) continue;
        add(read_from(p, in_[k], block_stage(b, k, me * per, len), Range{Buf::recv, static_cast<size_t>(p) * c + k * per, len}));
      }
      done_[k] = raise();
    };
    const size_t stages = shape_.stages;
    copy_blocks_in(b, 0);
    for (size_t k = 0; k < b.chunks; ++k) {
      if (stages > 1 && k + 1 < b.chunks) copy_blocks_in(b, k + 1);
      copy_out(k);
      if (stages == 1 && k + 1 < b.chunks) copy_blocks_in(b, k + 1);
    }
  }

  void slots_allgather() {
    const size_t c = d_.count, chunk = shape_.chunk_elements, me = static_cast<size_t>(me_);
    const size_t nk = chunks_of(c, chunk);
    begin_chunks(nk);
    const auto len = [&](size_t k) { return std::min(chunk, c - k * chunk); };
    const auto copy_in = [&](size_t k) {
      step();
      wait_stage_free(k);
      copy(Range{Buf::send, k * chunk, len(k)}, slot(k, 0, len(k)));
      in_[k] = raise();
    };
    const auto copy_out = [&](size_t k) {
      step();
      copy(Range{Buf::send, k * chunk, len(k)}, Range{Buf::recv, me * c + k * chunk, len(k)});
      for (int p = 0; p < n_; ++p) {
        if (p == me_) continue;
        add(read_from(p, in_[k], slot(k, 0, len(k)), Range{Buf::recv, static_cast<size_t>(p) * c + k * chunk, len(k)}));
      }
      done_[k] = raise();
    };
    // With two or more stages the next chunk goes in before this one is collected.
    const size_t stages = shape_.stages;
    copy_in(0);
    for (size_t k = 0; k < nk; ++k) {
      if (stages > 1 && k + 1 < nk) copy_in(k + 1);
      copy_out(k);
      if (stages == 1 && k + 1 < nk) copy_in(k + 1);
    }
  }

  void slots_broadcast() {
    const size_t c = d_.count, chunk = shape_.chunk_elements;
    const size_t nk = chunks_of(c, chunk);
    begin_chunks(nk);
    const bool root = me_ == d_.root;
    for (size_t k = 0; k < nk; ++k) {
      const size_t len = std::min(chunk, c - k * chunk);
      const Range part{Buf::send, k * chunk, len}, out{Buf::recv, k * chunk, len};
      step();
      wait_stage_free(k);
      // Non-roots publish too (no data), so that a rank naming another root fails as a mismatch.
      if (root) copy(part, slot(k, 0, len));
      in_[k] = raise();
      if (root) copy(part, out);
      else add(read_from(d_.root, in_[k], slot(k, 0, len), out));
      done_[k] = raise();
    }
  }

  // ---- single copy

  // Publishes this rank's buffers (the region carries their addresses).
  uint32_t publish_buffers() {
    s_.announces_buffers = true;
    step();
    return raise();
  }

  // After what is built so far (which published `announced`, the rank's first flag), a branch
  // every rank takes alike by `rule`: variant 0 built by `first`, variant 1 by `second`, each
  // numbering its flags on from `announced`.
  template <class First, class Second>
  void branch(BranchRule rule, const First& first, const Second& second) {
    const size_t prefix = s_.steps.size();
    const uint32_t announced = flag_;
    s_.branch = rule;
    for (int v = 0; v < 2; ++v) {
      if (v == 0) first();
      else second();
      s_.variants.emplace_back(std::make_move_iterator(s_.steps.begin() + static_cast<std::ptrdiff_t>(prefix)),
                               std::make_move_iterator(s_.steps.end()));
      s_.steps.resize(prefix);
      flag_ = announced;
    }
  }
  // Done with the peers' buffers; when they read this rank's, waits until they all are.
  void finish_single_copy(bool others_read_mine) {
    step();
    const uint32_t done = raise();
    if (others_read_mine) wait_all(done);
  }

  void single_copy_allreduce(uint32_t buffers) {
    const size_t c = d_.count, align = shape_.align_elements;
    const size_t chunk = std::max<size_t>(shape_.single_copy_part_elements, 1) * static_cast<size_t>(n_);
    const size_t nk = chunks_of(c, chunk);
    reduced_.assign(nk, 0);
    s_.scratch_count = part_of(std::min(c, chunk), 0, n_, align).count();
    const auto len = [&](size_t k) { return std::min(chunk, c - k * chunk); };
    // A rank reduces its part of each chunk from every rank's input straight into its output,
    // then reads the peers' reduced parts from their outputs. In place, a rank writes a peer's
    // part into its buffer only once that peer says it has read the input there.
    const auto reduce_own = [&](size_t k) {
      step();
      const Part own = part_of(len(k), me_, n_, align);
      if (own.count() > 0) {
        const size_t at = k * chunk + own.lo;
        reduce_in_rank_order(Range{Buf::recv, at, own.count()}, Range{Buf::scratch, 0, own.count()}, [&](int q) {
          return Source{q, q == me_ ? 0u : buffers, Range{Buf::send, at, own.count()}};
        });
      }
      reduced_[k] = raise();
    };
    const auto collect = [&](size_t k) {
      step();
      for (int p = 0; p < n_; ++p) {
        const Part part = part_of(len(k), p, n_, align);
        if (p == me_ || part.count() == 0) continue;
        const Range r{Buf::recv, k * chunk + part.lo, part.count()};
        add(read_from(p, reduced_[k], r, r));
      }
    };
    // Reducing the next chunk before collecting this one hides how far apart the ranks run.
    reduce_own(0);
    for (size_t k = 0; k < nk; ++k) {
      if (k + 1 < nk) reduce_own(k + 1);
      collect(k);
    }
    finish_single_copy(true);
  }

  // Rank p reduces block p of every input. No rank writes where another reads (in place, a
  // rank's output is its own block, read by nobody).
  void single_copy_reducescatter() {
    const size_t c = d_.count, me = static_cast<size_t>(me_);
    const size_t align = std::max<size_t>(shape_.align_elements, 1);
    const size_t per = std::max(align, shape_.single_copy_part_elements / align * align);
    const size_t nk = chunks_of(c, per);
    s_.scratch_count = std::min(c, per);
    const uint32_t buffers = publish_buffers();
    for (size_t k = 0; k < nk; ++k) {
      step();
      const size_t at = k * per, len = std::min(per, c - at);
      reduce_in_rank_order(Range{Buf::recv, at, len}, Range{Buf::scratch, 0, len}, [&](int q) {
        return Source{q, q == me_ ? 0u : buffers, Range{Buf::send, me * c + at, len}};
      });
    }
    finish_single_copy(true);
  }

  // Each rank reads every peer's input straight into its block of the output. Peers read the
  // input, not the output: the rank copies its own block after publishing, while they read.
  // It first waits until every peer published, then reads them all: a read that finds its
  // peer not there yet sleeps in the middle of the rank's copies, and with more ranks than
  // cores that measured 5-12% slower (4 ranks at 4-16 MiB, 8 at 16 MiB over 2 cores).
  void single_copy_allgather() {
    const size_t c = d_.count;
    const uint32_t buffers = publish_buffers();
    step();
    wait_all(buffers);
    copy_out(Range{Buf::send, 0, c}, Range{Buf::recv, static_cast<size_t>(me_) * c, c});
    for (int p = 0; p < n_; ++p) {
      if (p != me_) read_out(p, buffers, Range{Buf::send, 0, c}, Range{Buf::recv, static_cast<size_t>(p) * c, c});
    }
    finish_single_copy(true);
  }

  // Block r of every peer's input straight into block p of the output. In place a rank would
  // overwrite blocks its peers still read: once the published buffers show a rank in place
  // (every rank sees the same), all take the slots instead (variant 1).
  void single_copy_alltoall() {
    const size_t c = d_.count, me = static_cast<size_t>(me_);
    const uint32_t buffers = publish_buffers();
    branch(
        BranchRule::any_in_place,
        [&] {
          step();
          copy_out(Range{Buf::send, me * c, c}, Range{Buf::recv, me * c, c});
          for (int p = 0; p < n_; ++p) {
            if (p != me_) read_out(p, buffers, Range{Buf::send, me * c, c}, Range{Buf::recv, static_cast<size_t>(p) * c, c});
          }
          finish_single_copy(true);
        },
        [&] { slots_alltoall(); });
  }

  // ---- zero copy (registered buffers)

  // AllReduce and Reduce from RegionShape::registered_elements: every rank announces its
  // buffers; when every rank's are registered, all take the zero-copy path, else the path of
  // unregistered buffers (single copy or the slots).
  void registered_or_not() {
    const uint32_t buffers = publish_buffers();
    branch(
        BranchRule::all_registered,
        [&] {
          if (d_.op == OpType::allreduce && single_copy()) single_copy_allreduce(buffers);
          else slots_allreduce(d_.op == OpType::reduce);
        },
        [&] { zero_copy(buffers); });
  }

  // Rank r owns part r of the buffer: piece by piece it reduces every rank's input there (read
  // in place in the peers' registered buffers) in rank order in cache-sized scratch, and writes
  // the result into every rank's output (the root's only, for Reduce). Each
  // part of every buffer is read and written by its owner alone, so in place needs no more.
  // A rank returns once every peer says it is done: its input read, its output written.
  void zero_copy(uint32_t buffers) {
    const size_t c = d_.count;
    const Part own = part_of(c, me_, n_, shape_.align_elements);
    const size_t piece = std::max<size_t>(shape_.zero_copy_piece_elements, 1);
    s_.scratch_count = std::max(s_.scratch_count, std::min(own.count(), piece));
    for (size_t at = own.lo; at < own.hi; at += piece) {
      const size_t len = std::min(piece, own.hi - at);
      const Range acc{Buf::scratch, 0, len}, out{Buf::recv, at, len};
      step();
      reduce_in_rank_order(acc, acc, [&](int q) {
        return Source{q, q == me_ ? 0u : buffers, Range{Buf::send, at, len}};
      });
      // Each rank starts with its successor's output, so the writes spread over the ranks.
      for (int j = 1; j <= n_; ++j) {
        const int q = (me_ + j) % n_;
        if (d_.op == OpType::reduce && q != d_.root) continue;
        Action a = q == me_ ? local_copy(acc, out) : write_to(q, buffers, out, acc);
        a.stream = stream_output();
        add(a);
      }
    }
    finish_single_copy(true);
  }

  // Every rank reads the root's input straight into its output; the root returns once all have.
  // Every rank publishes (a rank naming another root is a mismatch).
  void single_copy_broadcast() {
    const size_t c = d_.count;
    const uint32_t buffers = publish_buffers();
    step();
    if (me_ == d_.root) copy_out(Range{Buf::send, 0, c}, Range{Buf::recv, 0, c});
    else read_out(d_.root, buffers, Range{Buf::send, 0, c}, Range{Buf::recv, 0, c});
    finish_single_copy(me_ == d_.root);
  }

  const CollectiveDesc& d_;
  int me_, n_;
  RegionShape shape_;
  RankSchedule s_;
  uint32_t flag_ = 0;
  std::vector<uint32_t> in_, reduced_, done_;  // per chunk: the flag value of each event
};

}  // namespace

RankSchedule direct_schedule(const CollectiveDesc& desc, int rank) { return DirectBuilder(desc, rank).build(); }

}  // namespace hoop::schedule
