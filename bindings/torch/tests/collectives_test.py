"""Every collective of the "hoop" backend against Gloo's result and a local reference.

Run on N ranks by hoop-run or torchrun (env:// rendezvous). Inputs are small integers made
from (seed, rank), so every rank can compute the exact expected result of every rank's data,
and sums stay exact in every dtype. Exits non-zero on the first wrong value.
"""
import datetime
import sys
import warnings

import torch
import torch.distributed as dist

import hoop_torch  # noqa: F401  (registers the backend)

SIZES = [0, 1, 7, 1000, 70000]
REDUCE_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
                 torch.uint8, torch.int32, torch.int64, torch.bool]
MOVE_DTYPES = REDUCE_DTYPES + [torch.int16, torch.complex64]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}


def make(seed, rank, n, dtype, op="sum"):
    """Rank `rank`'s input: small integers, positive and at most 2 for products."""
    g = torch.Generator().manual_seed(seed * 997 + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype == torch.complex64:
        return torch.complex(make(seed, rank, n, torch.float32), make(seed + 1, rank, n, torch.float32))
    lo, hi = (1, 3) if op == "product" else ((0, 4) if dtype == torch.uint8 else (-3, 4))
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


def reference(inputs, op, dtype):
    """The reduction of every rank's input, computed here."""
    if dtype == torch.bool:
        stacked = torch.stack(inputs)
        return {"sum": stacked.any(0), "max": stacked.any(0), "product": stacked.all(0),
                "min": stacked.all(0)}[op]
    stacked = torch.stack([t.double() for t in inputs])
    out = {"sum": stacked.sum(0), "product": stacked.prod(0), "min": stacked.min(0).values,
           "max": stacked.max(0).values, "avg": stacked.mean(0)}[op]
    return out.to(dtype)


class Checker:
    def __init__(self, rank, size, gloo):
        self.rank, self.size, self.gloo = rank, size, gloo
        self.count = 0
        self.gloo_count = 0

    def same(self, got, want, what):
        self.count += 1
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            diff = (got != want).nonzero()[:5].flatten().tolist() if got.shape == want.shape else "shape"
            print(f"rank {self.rank}: WRONG {what}: dtype {got.dtype}/{want.dtype} "
                  f"shape {tuple(got.shape)}/{tuple(want.shape)} first differences at {diff}",
                  file=sys.stderr, flush=True)
            sys.exit(1)

    def gloo_result(self, fn, *tensors):
        """Runs fn on Gloo with copies of tensors; None when Gloo cannot (dtype, op)."""
        if any(t.numel() == 0 for t in tensors):
            return None  # Gloo's all_gather dies of SIGFPE on empty tensors
        copies = [t.clone() for t in tensors]
        try:
            fn(*copies, group=self.gloo)
        except RuntimeError:
            return None
        self.gloo_count += 1
        return copies


def check_all_reduce(c):
    seed = 1
    for dtype in REDUCE_DTYPES:
        for name, op in OPS.items():
            for n in SIZES if dtype in (torch.float32, torch.bfloat16) else SIZES[:4]:
                seed += 1
                mine = make(seed, c.rank, n, dtype, name)
                want = reference([make(seed, r, n, dtype, name) for r in range(c.size)], name, dtype)
                g = c.gloo_result(lambda t, group: dist.all_reduce(t, op, group=group), mine)
                dist.all_reduce(mine, op)
                c.same(mine, want, f"all_reduce {name} {dtype} n={n}")
                if g is not None:
                    c.same(mine, g[0], f"all_reduce {name} {dtype} n={n} vs gloo")
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        seed += 1
        mine = make(seed, c.rank, 999, dtype)
        want = reference([make(seed, r, 999, dtype) for r in range(c.size)], "avg", dtype)
        dist.all_reduce(mine, dist.ReduceOp.AVG)
        c.same(mine, want, f"all_reduce avg {dtype}")


def check_shared_memory_tensors(c):
    """Tensors in shared memory (share_memory_()) are registered with hoop and reduced in place
    in the peers' memory (zero copy from 1 MiB): the same results, on tensors reused across
    calls, on fresh ones, and on one whose storage is freed and replaced at the same size."""
    seed = 500
    for dtype, n in ((torch.float32, 300007), (torch.int64, 262144), (torch.bfloat16, 1 << 20), (torch.float32, 5)):
        for _ in range(2):
            seed += 1
            mine = make(seed, c.rank, n, dtype).share_memory_()
            want = reference([make(seed, r, n, dtype) for r in range(c.size)], "sum", dtype)
            dist.all_reduce(mine)
            c.same(mine, want, f"all_reduce of shared memory {dtype} n={n}")
            del mine
    seed += 1
    t = make(seed, c.rank, 1 << 18, torch.float32).share_memory_()
    dist.broadcast(t, src=1 % c.size)
    c.same(t, make(seed, 1 % c.size, 1 << 18, torch.float32), "broadcast of shared memory")


def check_non_contiguous(c):
    # A transposed view and a strided column: results land in the viewed elements only.
    base = torch.arange(64 * 6, dtype=torch.float32).reshape(64, 6) + c.rank
    view = base.t()[1:4]
    untouched = base[:, 4:].clone()
    dist.all_reduce(view)
    total = sum(torch.arange(64 * 6, dtype=torch.float32).reshape(64, 6) + r for r in range(c.size))
    c.same(base[:, 1:4].contiguous(), total[:, 1:4].contiguous(), "all_reduce of a transposed view")
    c.same(base[:, 4:].contiguous(), untouched, "elements outside the view")
    col = torch.full((50, 3), float(c.rank))[:, 1]
    dist.broadcast(col, src=c.size - 1)
    c.same(col.contiguous(), torch.full((50,), float(c.size - 1)), "broadcast into a strided column")


def check_async_and_future(c):
    works, tensors = [], []
    for i in range(5):
        t = torch.full((1000 + i,), float(c.rank + i))
        tensors.append(t)
        works.append(dist.all_reduce(t, async_op=True))
    fut = works[-1].get_future()
    for w in works:
        w.wait()
    for i, t in enumerate(tensors):
        c.same(t, torch.full((1000 + i,), float(sum(r + i for r in range(c.size)))), f"async all_reduce {i}")
    value = fut.wait()
    c.same(value[0], tensors[-1], "future value of all_reduce")
    # A chained callback sees the finished result.
    t = torch.ones(10)
    doubled = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    c.same(doubled.wait(), torch.full((10,), 2.0 * c.size), "future.then")
    w = dist.barrier(async_op=True)
    w.wait()
    if not w.is_completed():
        c.same(torch.zeros(1), torch.ones(1), "barrier work completed")


def check_all_reduce_coalesced(c):
    for dtype in (torch.float32, torch.int64):
        shapes = [(3, 5), (1,), (0,), (100,)]
        mine = [make(40 + i, c.rank, 1, dtype).expand(*s).contiguous() + i for i, s in enumerate(shapes)]
        g = c.gloo_result(lambda *ts, group: dist.all_reduce_coalesced(list(ts), group=group), *mine)
        dist.all_reduce_coalesced(mine)
        for i, s in enumerate(shapes):
            want = sum(make(40 + i, r, 1, dtype).expand(*s) + i for r in range(c.size))
            c.same(mine[i], want.to(dtype), f"all_reduce_coalesced {dtype} #{i}")
            if g is not None:
                c.same(mine[i], g[i], f"all_reduce_coalesced {dtype} #{i} vs gloo")


def check_broadcast(c):
    for dtype in MOVE_DTYPES:
        for root in range(c.size):
            for n in (0, 13, 5000):
                mine = make(60 + root, c.rank, n, dtype)
                g = c.gloo_result(lambda t, group: dist.broadcast(t, root, group=group), mine)
                dist.broadcast(mine, root)
                c.same(mine, make(60 + root, root, n, dtype), f"broadcast {dtype} root {root} n={n}")
                if g is not None:
                    c.same(mine, g[0], f"broadcast {dtype} root {root} vs gloo")


def check_reduce(c):
    for dtype in (torch.float32, torch.float16, torch.int32, torch.uint8, torch.bool):
        for name in ("sum", "max"):
            for root in range(c.size):
                mine = make(80 + root, c.rank, 3001, dtype, name)
                want = reference([make(80 + root, r, 3001, dtype, name) for r in range(c.size)], name, dtype)
                g = c.gloo_result(lambda t, group: dist.reduce(t, root, OPS[name], group=group), mine)
                dist.reduce(mine, root, OPS[name])
                if c.rank == root:
                    c.same(mine, want, f"reduce {name} {dtype} root {root}")
                    if g is not None:
                        c.same(mine, g[0], f"reduce {name} {dtype} root {root} vs gloo")


def check_all_gather(c):
    for dtype in MOVE_DTYPES:
        for n in (0, 5, 4099):
            mine = make(100, c.rank, n, dtype)
            want = [make(100, r, n, dtype) for r in range(c.size)]
            outs = [torch.empty(n, dtype=dtype) for _ in range(c.size)]
            outs_gloo = [torch.empty(n, dtype=dtype) for _ in range(c.size)]
            g = c.gloo_result(lambda t, group: dist.all_gather(outs_gloo, t, group=group), mine)
            dist.all_gather(outs, mine)
            for r in range(c.size):
                c.same(outs[r], want[r], f"all_gather {dtype} n={n} slot {r}")
                if g is not None:
                    c.same(outs[r], outs_gloo[r], f"all_gather {dtype} slot {r} vs gloo")
            flat = torch.empty(c.size * n, dtype=dtype)
            dist.all_gather_into_tensor(flat, mine)
            c.same(flat, torch.cat(want), f"all_gather_into_tensor {dtype} n={n}")
    # In place: the input is this rank's slot of the output.
    n = 777
    flat = torch.zeros(c.size * n)
    flat[c.rank * n:(c.rank + 1) * n] = make(101, c.rank, n, torch.float32)
    dist.all_gather_into_tensor(flat, flat[c.rank * n:(c.rank + 1) * n])
    c.same(flat, torch.cat([make(101, r, n, torch.float32) for r in range(c.size)]), "all_gather in place")
    # Non-contiguous outputs of the list form.
    outs = [torch.zeros(8, 4).t() for _ in range(c.size)]
    dist.all_gather(outs, torch.full((4, 8), float(c.rank)))
    for r in range(c.size):
        c.same(outs[r].contiguous(), torch.full((4, 8), float(r)), f"all_gather into transposed slot {r}")


def check_reduce_scatter(c):
    # Gloo has no reduce_scatter in torch 1.13: the local reference decides.
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.int8):
        for name in ("sum", "min"):
            for n in (0, 3, 2501):
                inputs = [make(120 + r, c.rank, n, dtype, name) for r in range(c.size)]
                want = reference([make(120 + c.rank, r, n, dtype, name) for r in range(c.size)], name, dtype)
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter(out, inputs, OPS[name])
                c.same(out, want, f"reduce_scatter {name} {dtype} n={n}")
                out2 = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out2, torch.cat(inputs), OPS[name])
                c.same(out2, want, f"reduce_scatter_tensor {name} {dtype} n={n}")
    n = 1001
    flat = torch.cat([make(140 + r, c.rank, n, torch.float32) for r in range(c.size)])
    want = reference([make(140 + c.rank, r, n, torch.float32) for r in range(c.size)], "sum", torch.float32)
    mine = flat[c.rank * n:(c.rank + 1) * n]
    dist.reduce_scatter_tensor(mine, flat)
    c.same(mine, want, "reduce_scatter_tensor in place")


def check_send_recv(c):
    right, left = (c.rank + 1) % c.size, (c.rank - 1) % c.size
    for dtype in (torch.float32, torch.int16, torch.bool, torch.complex128):
        for n in (1, 2_000_000):
            # Every rank sends first, more than a link buffers: the receiver takes the message.
            mine = make(160, c.rank, n, dtype)
            got = torch.empty(n, dtype=dtype)
            dist.send(mine, right)
            dist.recv(got, left)
            c.same(got, make(160, left, n, dtype), f"send/recv {dtype} n={n}")
    # Receives posted before the sends, around the ring, large and small.
    for n in (5, 2_000_000):
        got = torch.empty(n)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got, left),
                                       dist.P2POp(dist.isend, torch.full((n,), float(c.rank)), right)])
        for r in reqs:
            r.wait()
        c.same(got, torch.full((n,), float(left)), f"batch_isend_irecv irecv first n={n}")
    # Tags: received in the other order than sent.
    works = [dist.isend(torch.full((3,), float(tag)), right, tag=tag) for tag in (1, 2)]
    for tag in (2, 1):
        got = torch.empty(3)
        dist.recv(got, left, tag=tag)
        c.same(got, torch.full((3,), float(tag)), f"recv tag {tag}")
    for w in works:
        w.wait()
    # Into a non-contiguous receive buffer.
    target = torch.zeros(6, 4)
    dist.send(torch.full((6,), float(c.rank)), right)
    dist.recv(target[:, 2], left)
    c.same(target[:, 2].contiguous(), torch.full((6,), float(left)), "recv into a strided column")
    c.same(target[:, :2].contiguous(), torch.zeros(6, 2), "recv leaves other columns alone")
    # From any source: rank 0 takes one message from each other rank, in whatever order.
    if c.rank == 0:
        senders = set()
        for _ in range(c.size - 1):
            got = torch.empty(4, dtype=torch.int64)
            sender = dist.recv(got)
            c.same(got, torch.full((4,), sender, dtype=torch.int64), f"recv from any source ({sender})")
            senders.add(sender)
        c.same(torch.tensor(sorted(senders)), torch.arange(1, c.size), "senders of recv from any source")
    else:
        dist.send(torch.full((4,), c.rank, dtype=torch.int64), 0)
    # No rank sends rank 0 anything else before it has taken them all.
    dist.barrier()


def check_all_to_all(c):
    """all_to_all_single with equal, uneven and zero splits, and all_to_all of lists; rank r
    sends split(r, j) rows to rank j."""
    def split(r, j):
        return (r + 2 * j) % 3
    width = 5
    for dtype in MOVE_DTYPES:
        rows_in = [split(c.rank, j) for j in range(c.size)]
        rows_out = [split(r, c.rank) for r in range(c.size)]
        mine = make(200, c.rank, sum(rows_in) * width, dtype).reshape(-1, width)
        blocks = [make(200, r, sum(split(r, j) for j in range(c.size)) * width, dtype).reshape(-1, width)
                  .split([split(r, j) for j in range(c.size)])[c.rank] for r in range(c.size)]
        out = torch.empty(sum(rows_out), width, dtype=dtype)
        dist.all_to_all_single(out, mine, rows_out, rows_in)
        c.same(out, torch.cat(blocks), f"all_to_all_single uneven {dtype}")
        # Equal splits, into a non-contiguous output.
        mine = make(201, c.rank, c.size * 2 * width, dtype).reshape(-1, width)
        want = torch.cat([make(201, r, c.size * 2 * width, dtype).reshape(-1, width)[2 * c.rank:2 * c.rank + 2]
                          for r in range(c.size)])
        out = torch.empty(width, c.size * 2, dtype=dtype).t()
        dist.all_to_all_single(out, mine)
        c.same(out.contiguous(), want, f"all_to_all_single equal {dtype}")
        # Lists: tensor j of rank r goes to rank j (sizes differ, some are empty).
        ins = [make(202, c.rank * c.size + j, split(c.rank, j) * 7, dtype) for j in range(c.size)]
        outs = [torch.empty(split(r, c.rank) * 7, dtype=dtype) for r in range(c.size)]
        dist.all_to_all(outs, ins)
        for r in range(c.size):
            c.same(outs[r], make(202, r * c.size + c.rank, split(r, c.rank) * 7, dtype), f"all_to_all {dtype} from {r}")


def check_gather_scatter(c):
    for dtype in MOVE_DTYPES:
        for root in range(c.size):
            for n in (0, 3, 3000):
                mine = make(220 + root, c.rank, n, dtype)
                outs = [torch.empty(n, dtype=dtype) for _ in range(c.size)] if c.rank == root else None
                outs_gloo = [torch.empty(n, dtype=dtype) for _ in range(c.size)] if c.rank == root else None
                g = c.gloo_result(lambda t, group: dist.gather(t, outs_gloo, root, group=group), mine)
                dist.gather(mine, outs, root)
                if c.rank == root:
                    for r in range(c.size):
                        c.same(outs[r], make(220 + root, r, n, dtype), f"gather {dtype} root {root} n={n} from {r}")
                        if g is not None:
                            c.same(outs[r], outs_gloo[r], f"gather {dtype} root {root} from {r} vs gloo")
                ins = [make(240 + root, j, n, dtype) for j in range(c.size)] if c.rank == root else None
                got = torch.empty(n, dtype=dtype)
                g = c.gloo_result(lambda t, group: dist.scatter(t, ins, root, group=group), got)
                dist.scatter(got, ins, root)
                c.same(got, make(240 + root, c.rank, n, dtype), f"scatter {dtype} root {root} n={n}")
                if g is not None:
                    c.same(got, g[0], f"scatter {dtype} root {root} vs gloo")
    # Into a non-contiguous tensor; objects (sizes first, then padded bytes).
    got = torch.zeros(4, 6)
    dist.scatter(got[:, 1], [torch.full((4,), float(j)) for j in range(c.size)] if c.rank == 0 else None, 0)
    c.same(got[:, 1].contiguous(), torch.full((4,), float(c.rank)), "scatter into a strided column")
    objects = [None] * c.size if c.rank == c.size - 1 else None
    dist.gather_object({"rank": c.rank, "data": list(range(c.rank * 50))}, objects, c.size - 1)
    if c.rank == c.size - 1 and objects != [{"rank": r, "data": list(range(r * 50))} for r in range(c.size)]:
        c.same(torch.zeros(1), torch.ones(1), f"gather_object got {objects}")
    received = [None]
    dist.scatter_object_list(received, [("to", j, "x" * j * 100) for j in range(c.size)] if c.rank == 1 else None, 1)
    if received[0] != ("to", c.rank, "x" * c.rank * 100):
        c.same(torch.zeros(1), torch.ones(1), f"scatter_object_list got {received[0]}")


def check_all_gather_coalesced(c):
    shapes = [(2, 3), (0,), (17,)]
    for dtype in MOVE_DTYPES:
        mine = [make(260 + i, c.rank, 1, dtype).expand(*s).contiguous() for i, s in enumerate(shapes)]
        outs = [[torch.empty(s, dtype=dtype) for s in shapes] for _ in range(c.size)]
        dist.all_gather_coalesced(outs, mine)
        for r in range(c.size):
            for i, s in enumerate(shapes):
                c.same(outs[r][i], make(260 + i, r, 1, dtype).expand(*s), f"all_gather_coalesced {dtype} rank {r} #{i}")
        if dtype == torch.float32:
            outs_gloo = [[torch.empty(s, dtype=dtype) for s in shapes] for _ in range(c.size)]
            dist.all_gather_coalesced(outs_gloo, mine, group=c.gloo)
            c.gloo_count += 1
            for r in range(c.size):
                for i in range(len(shapes)):
                    c.same(outs[r][i], outs_gloo[r][i], f"all_gather_coalesced rank {r} #{i} vs gloo")


def check_sparse_all_reduce(c):
    # Rank r holds r entries (rank 0 none) of a 6 x 4 x 2 tensor, sparse in its first two
    # dimensions; some entries of different ranks coincide.
    for dtype in (torch.float32, torch.int64):
        def sparse(r):
            g = torch.Generator().manual_seed(300 + r)
            idx = torch.stack([torch.randint(0, 6, (r,), generator=g), torch.randint(0, 4, (r,), generator=g)])
            return torch.sparse_coo_tensor(idx, make(301, r, r * 2, dtype).reshape(r, 2), (6, 4, 2))
        mine = sparse(c.rank)
        dist.all_reduce(mine)
        c.same(mine.to_dense(), sum(sparse(r).to_dense() for r in range(c.size)), f"sparse all_reduce {dtype}")
        if not mine.is_coalesced():
            c.same(torch.zeros(1), torch.ones(1), "sparse all_reduce result coalesced")


def check_sub_group(c):
    # A group of the even ranks only, created by every rank as new_group requires.
    evens = list(range(0, c.size, 2))
    group = dist.new_group(evens, backend="hoop")
    if c.rank in evens:
        t = torch.tensor([float(c.rank)])
        dist.all_reduce(t, group=group)
        c.same(t, torch.tensor([float(sum(evens))]), "all_reduce on a sub-group")


def expect_error(c, what, fn, *needles):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        if all(n in msg for n in needles):
            c.count += 1
            return msg
        print(f"rank {c.rank}: {what}: error lacks {needles}: {msg}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"rank {c.rank}: {what}: no error raised", file=sys.stderr, flush=True)
    sys.exit(1)


def check_errors(c):
    # Refused before anything is sent: the group stays usable.
    expect_error(c, "int16 sum", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)),
                 f"hoop rank {c.rank}", "allreduce", "Short")
    expect_error(c, "bitwise and", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), dist.ReduceOp.BAND),
                 f"hoop rank {c.rank}", "allreduce", "not supported")
    expect_error(c, "root out of range", lambda: dist.broadcast(torch.ones(3), c.size + 3),
                 f"hoop rank {c.rank}", "broadcast", "root")
    expect_error(c, "split sizes", lambda: dist.all_to_all_single(torch.empty(3), torch.ones(3), [1] * c.size,
                                                                  [2] * c.size),
                 f"hoop rank {c.rank}", "alltoall_base", "split sizes add up to")
    # A message shorter than the receiving tensor.
    dist.send(torch.ones(5), (c.rank + 1) % c.size)
    expect_error(c, "short message", lambda: dist.recv(torch.empty(6), (c.rank - 1) % c.size),
                 f"hoop rank {c.rank}", "recv", "received 20 bytes", "tensor of 24")
    t = torch.ones(4)
    dist.all_reduce(t)
    c.same(t, torch.full((4,), float(c.size)), "all_reduce after refused calls")
    # Ranks that disagree on the count: every rank gets hoop's mismatch error, naming the op
    # and the peer, as a Python exception. The group is then unusable, so it is a separate one.
    group = dist.new_group(backend="hoop", timeout=datetime.timedelta(seconds=20))
    bad = torch.ones(100 + c.rank)
    expect_error(c, "count mismatch", lambda: dist.all_reduce(bad, group=group),
                 "hoop rank", "allreduce", "peer")
    w = None
    try:
        w = dist.all_reduce(torch.ones(3), group=group, async_op=True)
    except RuntimeError:
        pass
    if w is not None:
        expect_error(c, "after failure", w.wait, "hoop rank", "allreduce")


def main():
    warnings.filterwarnings("ignore", message=".*all_(reduce|gather)_coalesced will be deprecated")
    torch.set_num_threads(1)
    dist.init_process_group("hoop")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "hoop", dist.get_backend()
    gloo = dist.new_group(backend="gloo")
    c = Checker(rank, size, gloo)
    for check in (check_all_reduce, check_shared_memory_tensors, check_non_contiguous, check_async_and_future,
                  check_all_reduce_coalesced, check_broadcast, check_reduce, check_all_gather,
                  check_reduce_scatter, check_send_recv, check_all_to_all, check_gather_scatter,
                  check_all_gather_coalesced, check_sparse_all_reduce, check_sub_group):
        check(c)
    dist.barrier()
    check_errors(c)
    dist.barrier(group=gloo)
    if rank == 0:
        print(f"collectives ok on {size} ranks: {c.count} checks ({c.gloo_count} against gloo)", flush=True)
    # Teardown with works in flight whose tensors only the works still hold: releasing them
    # needs the GIL, which destroy_process_group holds while the groups go away.
    for _ in range(50):
        dist.all_reduce(torch.ones(20000), async_op=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
