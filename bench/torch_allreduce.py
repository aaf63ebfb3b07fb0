"""torch.distributed.all_reduce over message sizes, Gloo and hoop side by side in one run.

    hoop-run -n 4 -- /usr/bin/python3 bench/torch_allreduce.py
    (PYTHONPATH=build/release/python)

float32 sum, in place. For each size both backends run alternately, in several rounds (each a
warm-up, then timed iterations); a round's time is the slowest rank's mean per call and the
table shows each backend's best round, which keeps a busy machine's hiccups out of the ratio.
busbw = bytes/time x 2(N-1)/N, as hoop-bench and nccl-tests count it. Rank 0 prints a Markdown
table.
"""
import argparse
import time

import torch
import torch.distributed as dist

import hoop_torch  # noqa: F401  (registers the backend)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def time_allreduce(tensor, group, iters, warmup, control):
    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    dist.barrier(group=control)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    elapsed = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, dist.ReduceOp.MAX, group=control)
    return elapsed.item()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-b", "--min-bytes", default="4K")
    p.add_argument("-e", "--max-bytes", default="64M")
    p.add_argument("-f", "--factor", type=int, default=4)
    p.add_argument("--budget", default="128M", help="bytes reduced per size, backend and round (sets iterations)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per size; the best is shown")
    p.add_argument("--shared", action="store_true",
                   help="tensors in shared memory (share_memory_()), for both backends: hoop registers "
                        "them and reduces in place in the peers' memory")
    args = p.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"gloo": dist.group.WORLD, "hoop": dist.new_group(backend="hoop")}
    control = dist.new_group(backend="gloo")

    rows = []
    nbytes = parse_size(args.min_bytes)
    while nbytes <= parse_size(args.max_bytes):
        n = nbytes // 4
        iters = max(5, min(200, parse_size(args.budget) // nbytes))
        best = {}
        for name, group in groups.items():
            check = torch.ones(n)
            dist.all_reduce(check, group=group)
            assert torch.all(check == size), f"{name}: wrong all_reduce result at {nbytes} bytes"
        for _ in range(args.rounds):
            for name, group in groups.items():
                tensor = torch.zeros(n).share_memory_() if args.shared else torch.zeros(n)
                t = time_allreduce(tensor, group, iters, max(2, iters // 10), control)
                best[name] = min(t, best.get(name, t))
        rows.append([nbytes] + [(best[name], nbytes / best[name] * 2 * (size - 1) / size / 1e9)
                                for name in groups])
        nbytes *= args.factor

    if rank == 0:
        print(f"torch.distributed.all_reduce, float32 sum, {size} ranks on one host "
              f"(torch {torch.__version__}){', tensors in shared memory' if args.shared else ''}\n")
        print("| size | gloo time (us) | gloo busbw (GB/s) | hoop time (us) | hoop busbw (GB/s) | hoop / gloo |")
        print("|---:|---:|---:|---:|---:|---:|")
        for nbytes, (tg, bg), (th, bh) in rows:
            print(f"| {human(nbytes)} | {tg * 1e6:.1f} | {bg:.2f} | {th * 1e6:.1f} | {bh:.2f} | {tg / th:.2f}x |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
