"""Training through the "hoop" backend gives the parameters Gloo and a single process give.

1. DDP (several gradient buckets) trained some steps of SGD with momentum on a "hoop" group and
   on a "gloo" group from the same start: same parameters, on every rank.
2. The same, checked against one process training on all ranks' batches at once.
3. ZeroRedundancyOptimizer(Adam) over "hoop" matches plain Adam.
4. DDP with torch's own comm hooks, fp16_compress_hook and powerSGD_hook (whose callbacks issue
   further all_reduces and wait for them): trains as on gloo, parameters bit-identical on
   every rank.
5. DDP whose gradient buckets torch allocated inside hoop_torch.shared_memory_allocations():
   the gradients are views of buckets in shared memory, and it trains as on gloo.
Exits non-zero on a mismatch, and with every thread's stack after HANG_SECONDS without an end.
"""
import faulthandler
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import hoop_torch  # noqa: F401  (registers the backend)

STEPS = 6
BATCH = 8
HANG_SECONDS = 200


# Width 600 (0.37M parameters) is past DDP's first bucket (1 MiB): the small cap below then
# gives several buckets. The comm hooks train width 64, one bucket: torch's powerSGD_hook issues
# its all_reduces from the callbacks of concurrent buckets, in an order that differs between
# ranks (Gloo aborts on the mismatch, hoop reports mismatched calls).
WIDE, NARROW = 600, 64


def make_model(seed, width):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(20, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, 5))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, 20, generator=g), torch.randint(0, 5, (BATCH,), generator=g)


def train(model, optimizer, rank, steps=STEPS):
    for step in range(steps):
        x, y = batch(step, rank)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def ddp(group, rank, width=WIDE):
    # Each rank starts from different weights: DDP's initial broadcast must fix that.
    # A small bucket cap gives several buckets once DDP rebuilds them after the first step, so
    # several all_reduces are in flight.
    return DDP(make_model(seed=rank, width=width), process_group=group, bucket_cap_mb=0.004)


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def hooked_ddp(group, rank, hook):
    """DDP trained with `hook` (a torch comm hook and its state) on `group`."""
    model = ddp(group, rank, width=NARROW)
    state = group
    if hook is powerSGD_hook.powerSGD_hook:
        # Plain all_reduce for the first 2 steps, then rank-1 PowerSGD with error feedback.
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                            start_powerSGD_iter=2)
    model.register_comm_hook(state, hook)
    return train(model, sgd(model), rank)


def same_on_every_rank(params, gloo, what, rank):
    """Compares every parameter with rank 0's, bit for bit (through gloo)."""
    for p in params:
        theirs = p.clone()
        dist.broadcast(theirs, 0, group=gloo)
        close([p], [theirs], what, rank, rtol=0, atol=0)


def fail(rank, what):
    print(f"rank {rank}: {what}", file=sys.stderr, flush=True)
    sys.exit(1)


def close(a, b, what, rank, rtol=1e-5, atol=1e-6):
    for i, (x, y) in enumerate(zip(a, b)):
        if not torch.allclose(x, y, rtol=rtol, atol=atol):
            print(f"rank {rank}: {what}: parameter {i} differs by {(x - y).abs().max().item():.3g}",
                  file=sys.stderr, flush=True)
            sys.exit(1)


def main():
    torch.set_num_threads(1)
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    dist.init_process_group("hoop")
    rank, size = dist.get_rank(), dist.get_world_size()
    hoop = dist.group.WORLD
    gloo = dist.new_group(backend="gloo")

    model = ddp(hoop, rank)
    with_hoop = train(model, sgd(model), rank)
    model = ddp(gloo, rank)
    with_gloo = train(model, sgd(model), rank)
    close(with_hoop, with_gloo, "DDP hoop vs gloo", rank)

    same_on_every_rank(with_hoop, gloo, "DDP hoop parameters across ranks", rank)

    # One process, all ranks' batches: the mean loss over the whole batch has the averaged
    # gradient DDP computes.
    single = make_model(seed=0, width=WIDE)
    opt = sgd(single)
    for step in range(STEPS):
        xs, ys = zip(*(batch(step, r) for r in range(size)))
        opt.zero_grad()
        F.cross_entropy(single(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    close(with_hoop, [p.detach() for p in single.parameters()], "DDP hoop vs one process", rank,
          rtol=1e-4, atol=1e-5)

    # ZeRO: each rank steps Adam on its shard of the parameters, then broadcasts it.
    model = ddp(hoop, rank)
    zero = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
    with_zero = train(model, zero, rank)
    model = ddp(hoop, rank)
    with_adam = train(model, torch.optim.Adam(model.parameters(), lr=0.01), rank)
    close(with_zero, with_adam, "ZeroRedundancyOptimizer(Adam) vs Adam", rank)

    # The hooks chain collectives in future callbacks; PowerSGD's wait for the all_reduce they
    # issue. Rounding differs from gloo's (another summation order), amplified by PowerSGD's
    # orthogonalization: close, not equal.
    for hook in (default_hooks.fp16_compress_hook, powerSGD_hook.powerSGD_hook):
        with_hoop = hooked_ddp(hoop, rank, hook)
        same_on_every_rank(with_hoop, gloo, f"DDP {hook.__name__} parameters across ranks", rank)
        close(with_hoop, hooked_ddp(gloo, rank, hook), f"DDP {hook.__name__} hoop vs gloo", rank,
              rtol=1e-3, atol=1e-4)

    # DDP allocates its buckets at construction and again in the second step's forward; with
    # the gradients as views of them, every gradient lives in shared memory after that.
    model = make_model(seed=rank, width=WIDE)
    with hoop_torch.shared_memory_allocations(min_bytes=1):
        model = DDP(model, process_group=hoop, bucket_cap_mb=0.004, gradient_as_bucket_view=True)
        opt = sgd(model)
        train(model, opt, rank, steps=2)
    try:
        with hoop_torch.shared_memory_allocations(gloo):
            fail(rank, "shared_memory_allocations() took a gloo group")
    except ValueError as e:
        if "not a hoop group" not in str(e):
            fail(rank, f"shared_memory_allocations(gloo): {e}")
    if hoop_torch.in_shared_allocation(torch.empty(1 << 20)):
        fail(rank, "an allocation after shared_memory_allocations() ended took shared memory")
    for step in range(2, STEPS):
        x, y = batch(step, rank)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if not all(hoop_torch.in_shared_allocation(p.grad) for p in model.parameters()):
            fail(rank, f"step {step}: a DDP gradient is not in shared memory")
        opt.step()
    with_shared = [p.detach().clone() for p in model.parameters()]
    same_on_every_rank(with_shared, gloo, "DDP with shared-memory buckets across ranks", rank)
    close(with_shared, with_gloo, "DDP with shared-memory buckets vs gloo", rank)

    dist.barrier()
    if rank == 0:
        print(f"training ok on {size} ranks: DDP hoop == gloo == one process, ZeRO(Adam) == Adam, "
              "DDP with fp16_compress_hook and powerSGD_hook == gloo, DDP with buckets in shared memory == gloo",
              flush=True)
    # Exit without destroy_process_group, works in flight: hoop_torch's exit hook lets them
    # finish and release their tensors before Python finalizes.
    for _ in range(50):
        dist.all_reduce(torch.ones(20000), async_op=True)


if __name__ == "__main__":
    main()
