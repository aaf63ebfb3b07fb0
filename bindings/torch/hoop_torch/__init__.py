"""hoop as a torch.distributed backend.

    import hoop_torch                        # registers the backend "hoop"
    torch.distributed.init_process_group("hoop")

CPU tensors only. Collectives: all_reduce (+ coalesced), broadcast, reduce, all_gather
(+ into_tensor, + coalesced), reduce_scatter (+ tensor), gather, scatter, all_to_all
(+ single, with split sizes), barrier; send/recv with tags and from any source.
"""
import atexit as _atexit

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

__all__ = ["BACKEND_NAME"]
