"""torch.nn.parallel on one device. aneforge has one device, the Neural Engine (or its
simulator), so there is no batch to split: DataParallel runs the module as it is, which is what
torch's own does on a machine without GPUs (torch/nn/parallel/data_parallel.py: no device type
-> `self.module(*inputs)`), and data_parallel does the same (torch's raises "device type could
not be determined" there; scripts call it when a GPU count says so). Training across processes
is not in aneforge: DistributedDataParallel wraps a module in the process group of one that
aneforge.distributed forms, where there are no gradients to exchange.
"""
from __future__ import annotations

import contextlib

from .module import Module


def data_parallel(module, inputs, device_ids=None, output_device=None, dim: int = 0,
                  module_kwargs=None):
    """`module(*inputs, **module_kwargs)` on the one device (`device_ids`, `output_device` and
    `dim` are accepted: with one device there is no batch to scatter).

    >>> import aneforge as af
    >>> af.nn.parallel.data_parallel(af.nn.ReLU(), af.tensor([-1.0, 2.0]), range(2)).tolist()
    [0.0, 2.0]
    """
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))


class DataParallel(Module):
    """A module that runs `module` on the one device (torch's DataParallel where no CUDA device
    is available); `.module` is the wrapped module, so a checkpoint of `model.module` is the
    plain model's, as in torch. A state_dict of the wrapper has torch's `module.` prefix.

    >>> import aneforge as af
    >>> net = af.nn.DataParallel(af.nn.Linear(2, 1))
    >>> net(af.ones(3, 2)).shape, list(net.state_dict())[0]
    ((3, 1), 'module.weight')
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids: list = []          # torch's value without CUDA devices
        self.output_device, self.dim = None, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    """torch's multi-process training wrapper, in the process group of one process that
    `aneforge.distributed.init_process_group` forms (aneforge runs one process on one device):
    there is no other rank to average gradients with, so it runs `module` as it is, like
    torch's DDP with `world_size=1`. `.module` is the wrapped module and a state_dict has
    torch's `module.` prefix; `no_sync()` and `require_backward_grad_sync` are accepted. As in
    torch, constructing it before `init_process_group` raises ValueError.

    >>> import aneforge as af
    >>> af.distributed.init_process_group("nccl", world_size=1, rank=0)
    >>> net = af.nn.parallel.DistributedDataParallel(af.nn.Linear(2, 1), device_ids=[0])
    >>> net(af.ones(3, 2)).shape, list(net.state_dict())[0]
    ((3, 1), 'module.weight')
    >>> af.distributed.destroy_process_group()
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters: bool = False, **kwargs):
        from .. import distributed
        if not distributed.is_initialized():
            raise ValueError("DistributedDataParallel: " + distributed._NOT_INITIALIZED +
                             " (aneforge forms a process group of one process: "
                             "aneforge.distributed.init_process_group(world_size=1, rank=0))")
        super().__init__()
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.require_backward_grad_sync = True

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Skip the gradient exchange inside the block (there is none on one rank)."""
        yield
