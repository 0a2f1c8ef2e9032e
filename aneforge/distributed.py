"""torch.distributed for a world of one process: aneforge runs one process on one device, so
the only process group it can form is one rank, and every collective on one rank is the
identity (torch's own gloo backend gives the same results with `world_size=1`).

That is what training scripts written for several GPUs do when started as one plain process
(nanoGPT's train.py imports `init_process_group` and calls it only under torchrun; others
call it with `world_size=1`): `init_process_group` forms the group of one (any `backend`:
there is nothing to communicate), `get_rank()` is 0, `get_world_size()` 1, `all_reduce`,
`reduce` and `broadcast` leave the tensor as it is, `all_gather` copies it into the one slot,
and `nn.parallel.DistributedDataParallel` wraps a module once the group exists. A group of
more than one process raises, saying so; as in torch, `get_rank()` before
`init_process_group` raises ValueError.

>>> import aneforge as af
>>> import aneforge.distributed as dist
>>> dist.init_process_group("gloo", world_size=1, rank=0)
>>> t = af.tensor([1.0, 2.0])
>>> dist.all_reduce(t, op=dist.ReduceOp.SUM)
>>> dist.get_rank(), dist.get_world_size(), t.tolist()
(0, 1, [1.0, 2.0])
>>> dist.destroy_process_group()
>>> dist.is_initialized()
False
"""
from __future__ import annotations

import enum
import os

from .errors import AneforgeError

__all__ = ["ReduceOp", "Work", "all_gather", "all_reduce", "barrier", "broadcast",
           "destroy_process_group", "get_backend", "get_rank", "get_world_size",
           "init_process_group", "is_available", "is_initialized", "reduce"]

_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")
_group: dict | None = None      # the one-rank group: {"backend": ...}, or None


class ReduceOp(enum.Enum):
    """torch.distributed.ReduceOp's members; on one rank each reduction is the identity."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class Work:
    """What a collective with `async_op=True` returns: already complete."""

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def is_available() -> bool:
    """True: the process group of one is always available."""
    return True


def is_initialized() -> bool:
    """Whether `init_process_group` has formed the group (and it was not destroyed)."""
    return _group is not None


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout=None,
                       world_size: int = -1, rank: int = -1, store=None, group_name: str = "",
                       pg_options=None, device_id=None) -> None:
    """Form the process group of this one process. `world_size` and `rank` default, as under
    torch's `env://` method, to the WORLD_SIZE and RANK environment variables (1 and 0 when
    unset); a world of more than one process raises AneforgeError: aneforge cannot exchange
    tensors between processes. `backend` ("nccl", "gloo", ...) is recorded for `get_backend`."""
    global _group
    if _group is not None:
        raise ValueError("trying to initialize the default process group twice!")
    world = world_size if world_size != -1 else int(os.environ.get("WORLD_SIZE", "1"))
    rank = rank if rank != -1 else int(os.environ.get("RANK", "0"))
    if world != 1 or rank != 0:
        raise AneforgeError(
            f"init_process_group: world_size={world}, rank={rank}; aneforge runs one process on "
            f"one device and has no collectives between processes, so the only group it forms "
            f"is world_size=1, rank=0. Start the script as one plain process (python train.py, "
            f"not torchrun --nproc_per_node={world}, and RANK/WORLD_SIZE unset)")
    _group = {"backend": backend or "gloo"}


def destroy_process_group(group=None) -> None:
    """Dissolve the group (`init_process_group` may form it again)."""
    global _group
    _group = None


def _formed() -> dict:
    if _group is None:
        raise ValueError(_NOT_INITIALIZED)
    return _group


def get_rank(group=None) -> int:
    _formed()
    return 0


def get_world_size(group=None) -> int:
    _formed()
    return 1


def get_backend(group=None) -> str:
    return _formed()["backend"]


def _done(async_op: bool):
    _formed()
    return Work() if async_op else None


def barrier(group=None, async_op: bool = False, device_ids=None, timeout=None):
    """Nothing to wait for on one rank."""
    return _done(async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """`tensor` reduced over the one rank: unchanged, for every `op` (AVG of one value is it)."""
    return _done(async_op)


def reduce(tensor, dst: int | None = None, op=ReduceOp.SUM, group=None, async_op: bool = False,
           group_dst: int | None = None):
    """`tensor` reduced onto rank `dst` (0, the only one): unchanged."""
    return _done(async_op)


def broadcast(tensor, src: int | None = None, group=None, async_op: bool = False,
              group_src: int | None = None):
    """`tensor` sent from rank `src` (0) to every rank (itself): unchanged."""
    return _done(async_op)


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """`tensor_list[0]` (one slot per rank) becomes a copy of `tensor`."""
    _formed()
    if len(tensor_list) != 1:
        raise ValueError(f"all_gather: tensor_list needs one tensor per rank (1), got "
                         f"{len(tensor_list)}")
    tensor_list[0].copy_(tensor)
    return _done(async_op)
