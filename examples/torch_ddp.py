"""DDP training of an MLP with a few million parameters, on any torch.distributed backend.

    hoop-run -n 2 -- /usr/bin/python3 examples/torch_ddp.py --backend hoop
    python3 -m torch.distributed.run --standalone --nproc_per_node 2 examples/torch_ddp.py --backend gloo

Synthetic data; prints the mean and best step time (forward, backward with DDP's gradient
all_reduce, SGD step) on rank 0. The hoop backend needs the hoop_torch package on PYTHONPATH
(build/release/python after a build). --bucket-view makes the gradients views of DDP's buckets
(no copy into them); --shared-buckets (hoop) also puts the buckets in shared memory, made by
hoop_torch.shared_memory_allocations() around DDP's construction and its first two steps, so
the all_reduces run in place in the peers' buckets.
"""
import argparse
import contextlib
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="hoop", help="gloo or hoop (default: hoop)")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--width", type=int, default=1024, help="hidden width")
    p.add_argument("--layers", type=int, default=4, help="hidden layers")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--bucket-view", action="store_true", help="gradient_as_bucket_view=True")
    p.add_argument("--shared-buckets", action="store_true",
                   help="DDP's buckets in shared memory (hoop; implies --bucket-view)")
    args = p.parse_args()
    if args.shared_buckets and (args.backend != "hoop" or args.warmup < 2):
        p.error("--shared-buckets needs --backend hoop and --warmup 2 or more")
    return args


def main():
    args = parse_args()
    if args.backend == "hoop":
        import hoop_torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(args.threads)
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    layers = [torch.nn.Linear(args.width, args.width) for _ in range(args.layers)]
    body = [m for layer in layers for m in (layer, torch.nn.ReLU())]
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, args.width, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)

    def step(model, opt):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    # DDP allocates its buckets at construction and rebuilds them in the second step's forward:
    # with --shared-buckets, those are the first two warm-up steps.
    first_steps = 2 if args.shared_buckets else 0
    shared = hoop_torch.shared_memory_allocations() if args.shared_buckets else contextlib.nullcontext()
    with shared:
        model = DDP(torch.nn.Sequential(*body, torch.nn.Linear(args.width, 10)),
                    gradient_as_bucket_view=args.bucket_view or args.shared_buckets)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        for _ in range(first_steps):
            step(model, opt)
    params = sum(p.numel() for p in model.parameters())

    times = []
    for k in range(args.warmup - first_steps + args.steps):
        t0 = time.perf_counter()
        loss = step(model, opt)
        if k >= args.warmup - first_steps:
            times.append(time.perf_counter() - t0)
    # The slowest rank's mean is the job's step time.
    stats = torch.tensor([sum(times) / len(times), min(times)], dtype=torch.float64)
    dist.all_reduce(stats, dist.ReduceOp.MAX)
    if rank == 0:
        layout = "shared buckets" if args.shared_buckets else "bucket view" if args.bucket_view else "default"
        print(f"backend {args.backend} ({layout}): {size} ranks, {params / 1e6:.2f}M parameters, "
              f"step time {stats[0].item() * 1e3:.1f} ms mean, {stats[1].item() * 1e3:.1f} ms best "
              f"over {args.steps} steps, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
