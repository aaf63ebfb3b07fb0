"""hoop as a torch.distributed backend.

    import hoop_torch                        # registers the backend "hoop"
    torch.distributed.init_process_group("hoop")

CPU tensors only. Collectives: all_reduce (+ coalesced), broadcast, reduce, all_gather
(+ into_tensor, + coalesced), reduce_scatter (+ tensor), gather, scatter, all_to_all
(+ single, with split sizes), barrier; send/recv with tags and from any source.

Tensors in shared memory (share_memory_(), or made inside shared_memory_allocations()) are
reduced in place in the peers' memory, without copies between the ranks' buffers.
"""
import atexit as _atexit
import contextlib as _contextlib

import torch.distributed as _dist  # registers c10d's Python types that _C builds on

from . import _C

BACKEND_NAME = "hoop"


def _create_process_group(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


if BACKEND_NAME.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND_NAME, _create_process_group)

# Works still finishing at exit release their tensors while Python still lets other threads
# take the GIL (a thread that asks for it during finalization is stopped mid-way).
_atexit.register(_C._drain_all, 10.0)

in_shared_allocation = _C.in_shared_allocation


@_contextlib.contextmanager
def shared_memory_allocations(group=None, min_bytes=1 << 20):
    """While inside, torch's CPU allocations of at least `min_bytes` come from shared memory
    registered with `group` (a hoop group; the default group when None), so that collectives
    on them move data between the ranks' buffers in place.

    Made for the buffers torch allocates itself, DDP's gradient buckets above all: DDP
    allocates them when it is constructed and once more when it rebuilds them, in the forward
    of its second step, so both belong inside:

        with hoop_torch.shared_memory_allocations():
            model = DDP(model, gradient_as_bucket_view=True)
            for step in range(2):
                train_step(model)
        ...  # the rest of the training, buckets in shared memory

    torch has one CPU allocator per process: everything any thread allocates meanwhile at
    that size (activations too) takes shared memory, which costs a mapping per allocation.
    Not nested. Tensors keep their memory until torch frees them.
    """
    if group is None:
        group = _dist.distributed_c10d._get_default_group()
    _C._install_shared_allocator(group, int(min_bytes))
    try:
        yield
    finally:
        _C._remove_shared_allocator()


__all__ = ["BACKEND_NAME", "shared_memory_allocations", "in_shared_allocation"]
