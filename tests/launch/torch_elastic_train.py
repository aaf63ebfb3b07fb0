"""A small DDP training run on the "hoop" backend that loses a worker in torchrun's first
attempt: the last rank SIGKILLs itself at step KILL_AT when TORCHELASTIC_RESTART_COUNT is 0.
The agent restarts the group; the next attempt trains from the start and must finish, every
rank holding the same parameters. Prints "attempt A rank R ..." lines that the test checks.
"""
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import hoop_torch  # noqa: F401  (registers the backend)

STEPS = 12
KILL_AT = 4


def main():
    torch.set_num_threads(1)
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("hoop")
    rank, size = dist.get_rank(), dist.get_world_size()
    print(f"attempt {attempt} rank {rank} of {size} up", flush=True)
    torch.manual_seed(rank)  # different starts: DDP's first broadcast makes them equal
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        if attempt == 0 and rank == size - 1 and step == KILL_AT:
            print(f"attempt {attempt} rank {rank} kills itself at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        g = torch.Generator().manual_seed(100 * step + rank)
        x, y = torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    lowest, highest = flat.clone(), flat.clone()
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    if not torch.equal(lowest, highest):
        print(f"attempt {attempt} rank {rank}: parameters differ between ranks", file=sys.stderr)
        sys.exit(1)
    print(f"attempt {attempt} rank {rank} finished {STEPS} steps, loss {loss.item():.4f}, "
          f"parameters equal on all ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
