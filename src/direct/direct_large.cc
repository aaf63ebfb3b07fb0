// The large-message path of shm-direct: pipelined chunks through per-rank slots.
//
// Chunk g (counted over every large op on the region, identically on every rank) uses stage
// g % stages of every rank's slots. A rank publishes three counters per chunk: chunk_in (its
// slot holds its input), chunk_reduced (its part of the slot holds the reduced result) and
// chunk_done (it no longer reads anyone's slot for this chunk). A slot stage is rewritten only
// once every rank is done with the chunk that used it before.
#include <algorithm>
#include <cstring>

#include "core/byte_ranges.h"
#include "core/errors.h"
#include "direct/direct_comm.h"
#include "direct/rank_order.h"

namespace hoop::direct {

namespace {

// Chunk by chunk, in, then out; with two or more stages the next chunk goes in before this one
// is collected.
template <class In, class Out>
void copy_in_then_out(size_t chunks, size_t stages, const In& copy_in, const Out& copy_out) {
  copy_in(0);
  for (size_t k = 0; k < chunks; ++k) {
    if (stages > 1 && k + 1 < chunks) copy_in(k + 1);
    copy_out(k);
    if (stages == 1 && k + 1 < chunks) copy_in(k + 1);
  }
}

}  // namespace

DirectComm::Chunks DirectComm::take_chunks(size_t count, size_t per_chunk) {
  const Chunks ch{chunks_, (count + per_chunk - 1) / per_chunk, per_chunk, count};
  chunks_ += ch.n;
  return ch;
}

void DirectComm::wait_stage_free(uint64_t g) {
  const uint64_t stages = region_->geometry().stages;
  if (g < stages) return;
  const uint64_t need = g - stages + 1;  // chunk g - stages finished
  for (int p = 0; p < p_.nranks; ++p) {
    if (p == p_.rank) continue;
    RankControl& pc = region_->control(p);
    sync_->wait(p, "finish reading an earlier chunk",
                [&] { return pc.chunk_done.load(std::memory_order_acquire) >= need; });
  }
}

void DirectComm::publish_chunk_in(uint64_t g, const OpSignature& sig) {
  SlotHeader& h = region_->slot_header(p_.rank, g % region_->geometry().stages);
  h.chunk = g + 1;
  h.sig = sig;
  region_->control(p_.rank).chunk_in.store(g + 1, std::memory_order_release);
  sync_->notify();
}

void DirectComm::wait_chunk_in(int peer, uint64_t g, const OpSignature& sig) {
  RankControl& pc = region_->control(peer);
  sync_->wait(peer, "publish its data", [&] { return pc.chunk_in.load(std::memory_order_acquire) >= g + 1; });
  const SlotHeader& h = region_->slot_header(peer, g % region_->geometry().stages);
  if (h.chunk != g + 1)
    throw_error(ErrorCode::mismatch,
                fmt::format("rank {} is at shm-direct chunk {}, this rank at {}: the ranks called "
                            "different collectives",
                            peer, h.chunk, g + 1),
                ErrorContext{p_.rank, sync_->context().op, sig.seq, peer});
  if (!(h.sig == sig)) sync_->raise_mismatch(peer, sig, h.sig);
}

void DirectComm::wait_chunk_reduced(int peer, uint64_t g) {
  RankControl& pc = region_->control(peer);
  sync_->wait(peer, "reduce its part", [&] { return pc.chunk_reduced.load(std::memory_order_acquire) >= g + 1; });
}

void DirectComm::set_chunk_reduced(uint64_t g) {
  region_->control(p_.rank).chunk_reduced.store(g + 1, std::memory_order_release);
  sync_->notify();
}

void DirectComm::set_chunk_done(uint64_t g) {
  region_->control(p_.rank).chunk_done.store(g + 1, std::memory_order_release);
  sync_->notify();
}

// AllReduce (and Reduce when only_root_gets_result): copy in all but the own part, reduce the
// own part from every slot in rank order, copy the other parts out.
void DirectComm::large_allreduce(const Call& c, bool only_root_gets_result) {
  const int n = p_.nranks, me = p_.rank;
  const size_t es = dtype_size(c.dtype);
  const size_t stages = region_->geometry().stages;
  const size_t chunk = region_->geometry().chunk_bytes / es;
  const Chunks ch = take_chunks(c.count, chunk);
  const OpSignature sig = current_sig_;
  const bool gets_result = !only_root_gets_result || me == c.root;
  const auto* send = static_cast<const std::byte*>(c.send);
  auto* recv = static_cast<std::byte*>(c.recv);

  const auto copy_in = [&](size_t k) {
    const uint64_t g = ch.g0 + k;
    wait_stage_free(g);
    const size_t len = ch.len(k);
    const Part own = part_of(len, me, n, es);
    std::byte* dst = region_->slot(me, g % stages);
    const std::byte* src = send + k * chunk * es;
    std::memcpy(dst, src, own.lo * es);
    std::memcpy(dst + own.hi * es, src + own.hi * es, (len - own.hi) * es);
    publish_chunk_in(g, sig);
  };
  const auto reduce_own = [&](size_t k) {
    const uint64_t g = ch.g0 + k;
    const size_t s = g % stages;
    const Part own = part_of(ch.len(k), me, n, es);
    if (own.count() > 0) {
      for (int p = 0; p < n; ++p)
        if (p != me) wait_chunk_in(p, g, sig);
      const size_t at = (k * chunk + own.lo) * es;
      const auto src = [&](int q) -> const std::byte* {
        return q == me ? send + at : region_->slot(q, s) + own.lo * es;
      };
      // Reduced in private memory, then copied out: the kernel's own stores into slot lines a
      // peer read last (shared with its cache) made the whole AllReduce 1.1-1.25x slower.
      const size_t bytes = own.count() * es;
      auto* acc = static_cast<std::byte*>(reduce_buffers_.get(bytes));
      reduce_in_rank_order(acc, acc, n, src, own.count(), c.dtype, c.redop);
      std::memcpy(region_->slot(me, s) + own.lo * es, acc, bytes);
      if (gets_result) std::memcpy(recv + at, acc, bytes);
    }
    set_chunk_reduced(g);
  };
  const auto copy_out = [&](size_t k) {
    const uint64_t g = ch.g0 + k;
    if (gets_result) {
      const size_t len = ch.len(k);
      for (int p = 0; p < n; ++p) {
        const Part part = part_of(len, p, n, es);
        if (p == me || part.count() == 0) continue;
        wait_chunk_reduced(p, g);
        std::memcpy(recv + (k * chunk + part.lo) * es, region_->slot(p, g % stages) + part.lo * es,
                    part.count() * es);
      }
    }
    set_chunk_done(g);
  };

  // With two or more stages the next chunk is copied in between reducing this one and
  // collecting the peers' parts, which hides how far apart the ranks finish their reductions.
  copy_in(0);
  for (size_t k = 0; k < ch.n; ++k) {
    reduce_own(k);
    if (stages > 1 && k + 1 < ch.n) copy_in(k + 1);
    copy_out(k);
    if (stages == 1 && k + 1 < ch.n) copy_in(k + 1);
  }
}

DirectComm::Chunks DirectComm::take_block_chunks(const Call& c) {
  const size_t es = dtype_size(c.dtype);
  const size_t align = std::max<size_t>(1, kLine / es);
  size_t per_block = region_->geometry().chunk_bytes / static_cast<size_t>(p_.nranks) / es;
  if (per_block >= align) per_block = per_block / align * align;
  return take_chunks(c.count, std::max<size_t>(per_block, 1));
}

void DirectComm::copy_blocks_in(const Call& c, const Chunks& ch, size_t k) {
  const uint64_t g = ch.g0 + k;
  const size_t es = dtype_size(c.dtype);
  wait_stage_free(g);
  std::byte* slot = region_->slot(p_.rank, g % region_->geometry().stages);
  const auto* send = static_cast<const std::byte*>(c.send);
  for (int p = 0; p < p_.nranks; ++p) {
    if (p == p_.rank) continue;
    std::memcpy(slot + static_cast<size_t>(p) * ch.per * es,
                send + (static_cast<size_t>(p) * c.count + k * ch.per) * es, ch.len(k) * es);
  }
  publish_chunk_in(g, current_sig_);
}

// ReduceScatter: block p of every rank's input goes to rank p. A chunk holds the same
// sub-range of every block.
void DirectComm::large_reducescatter(const Call& c) {
  const int n = p_.nranks, me = p_.rank;
  const size_t es = dtype_size(c.dtype);
  const size_t stages = region_->geometry().stages;
  const Chunks ch = take_block_chunks(c);
  const size_t per_block = ch.per;
  const OpSignature sig = current_sig_;
  const auto* send = static_cast<const std::byte*>(c.send);
  auto* recv = static_cast<std::byte*>(c.recv);
  const size_t block_bytes = c.count * es;
  const bool reduce_into_recv = !ranges_overlap(recv, block_bytes, send, block_bytes * static_cast<size_t>(n));

  const auto copy_in = [&](size_t k) { copy_blocks_in(c, ch, k); };
  const auto reduce_own = [&](size_t k) {
    const uint64_t g = ch.g0 + k;
    const size_t s = g % stages;
    const size_t len = ch.len(k);
    for (int p = 0; p < n; ++p)
      if (p != me) wait_chunk_in(p, g, sig);
    const size_t in_slot = static_cast<size_t>(me) * per_block * es;
    const auto src = [&](int q) -> const std::byte* {
      return q == me ? send + (static_cast<size_t>(me) * c.count + k * per_block) * es
                     : region_->slot(q, s) + in_slot;
    };
    std::byte* out = recv + k * per_block * es;
    // In place, the output is the own input block: reduce into the free own part of the slot.
    std::byte* dst = reduce_into_recv ? out : region_->slot(me, s) + in_slot;
    reduce_in_rank_order(dst, dst, n, src, len, c.dtype, c.redop);
    if (dst != out) std::memcpy(out, dst, len * es);
    set_chunk_done(g);
  };

  copy_in(0);
  for (size_t k = 0; k < ch.n; ++k) {
    reduce_own(k);
    if (k + 1 < ch.n) copy_in(k + 1);
  }
}

// AllToAll: block p of every rank's input goes to rank p, a chunk holding the same sub-range
// of every block. In place is safe: chunk k of every block is in the slot before the peers'
// chunk k overwrites it, and chunk k + 1 is still untouched.
void DirectComm::large_alltoall(const Call& c) {
  const int n = p_.nranks, me = p_.rank;
  const size_t es = dtype_size(c.dtype);
  const size_t stages = region_->geometry().stages;
  const Chunks ch = take_block_chunks(c);
  const OpSignature sig = current_sig_;
  const auto* send = static_cast<const std::byte*>(c.send);
  auto* recv = static_cast<std::byte*>(c.recv);
  const auto at = [&](int block, size_t k) { return (static_cast<size_t>(block) * c.count + k * ch.per) * es; };
  const auto copy_in = [&](size_t k) { copy_blocks_in(c, ch, k); };
  const auto copy_out = [&](size_t k) {
    const uint64_t g = ch.g0 + k;
    const size_t len = ch.len(k) * es;
    if (recv + at(me, k) != send + at(me, k)) std::memmove(recv + at(me, k), send + at(me, k), len);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      wait_chunk_in(p, g, sig);
      std::memcpy(recv + at(p, k), region_->slot(p, g % stages) + static_cast<size_t>(me) * ch.per * es, len);
    }
    set_chunk_done(g);
  };

  copy_in_then_out(ch.n, stages, copy_in, copy_out);
}

void DirectComm::large_allgather(const Call& c) {
  const int n = p_.nranks, me = p_.rank;
  const size_t es = dtype_size(c.dtype);
  const size_t stages = region_->geometry().stages;
  const size_t chunk = region_->geometry().chunk_bytes / es;
  const Chunks ch = take_chunks(c.count, chunk);
  const OpSignature sig = current_sig_;
  const auto* send = static_cast<const std::byte*>(c.send);
  auto* recv = static_cast<std::byte*>(c.recv);

  const auto copy_in = [&](size_t k) {
    const uint64_t g = ch.g0 + k;
    wait_stage_free(g);
    std::memcpy(region_->slot(me, g % stages), send + k * chunk * es, ch.len(k) * es);
    publish_chunk_in(g, sig);
  };
  const auto copy_out = [&](size_t k) {
    const uint64_t g = ch.g0 + k;
    const size_t len = ch.len(k);
    std::byte* own = recv + (static_cast<size_t>(me) * c.count + k * chunk) * es;
    if (own != send + k * chunk * es) std::memmove(own, send + k * chunk * es, len * es);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      wait_chunk_in(p, g, sig);
      std::memcpy(recv + (static_cast<size_t>(p) * c.count + k * chunk) * es,
                  region_->slot(p, g % stages), len * es);
    }
    set_chunk_done(g);
  };

  copy_in_then_out(ch.n, stages, copy_in, copy_out);
}

void DirectComm::large_broadcast(const Call& c) {
  const int me = p_.rank;
  const size_t es = dtype_size(c.dtype);
  const size_t stages = region_->geometry().stages;
  const size_t chunk = region_->geometry().chunk_bytes / es;
  const Chunks ch = take_chunks(c.count, chunk);
  const OpSignature sig = current_sig_;
  const auto* send = static_cast<const std::byte*>(c.send);
  auto* recv = static_cast<std::byte*>(c.recv);
  for (size_t k = 0; k < ch.n; ++k) {
    const uint64_t g = ch.g0 + k;
    const size_t len = ch.len(k) * es;
    if (me == c.root) {
      wait_stage_free(g);
      std::memcpy(region_->slot(me, g % stages), send + k * chunk * es, len);
      publish_chunk_in(g, sig);
      if (recv != send) std::memmove(recv + k * chunk * es, send + k * chunk * es, len);
    } else {
      // The signature alone, so that a rank naming another root fails as a mismatch.
      wait_stage_free(g);
      publish_chunk_in(g, sig);
      wait_chunk_in(c.root, g, sig);
      std::memcpy(recv + k * chunk * es, region_->slot(c.root, g % stages), len);
    }
    set_chunk_done(g);
  }
}

}  // namespace hoop::direct
