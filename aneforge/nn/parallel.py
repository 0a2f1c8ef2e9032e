"""torch.nn.parallel on one device. aneforge has one device, the Neural Engine (or its
simulator), so there is no batch to split: DataParallel runs the module as it is, which is what
torch's own does on a machine without GPUs (torch/nn/parallel/data_parallel.py: no device type
-> `self.module(*inputs)`), and data_parallel does the same (torch's raises "device type could
not be determined" there; scripts call it when a GPU count says so). Training across processes
(DistributedDataParallel, torch.distributed) is not in aneforge.
"""
from __future__ import annotations

from ..errors import AneforgeError
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
    """torch's multi-process training wrapper: not in aneforge, which runs one process on one
    device. Constructing it raises, saying what to use instead.

    >>> import aneforge as af
    >>> af.nn.parallel.DistributedDataParallel(af.nn.ReLU())
    Traceback (most recent call last):
    aneforge.errors.AneforgeError: DistributedDataParallel trains across processes ...
    """

    def __init__(self, module: Module, *args, **kwargs):
        raise AneforgeError("DistributedDataParallel trains across processes (torch.distributed), "
                            "which aneforge has not: it runs one process on one device. Use the "
                            "module itself (or nn.DataParallel, which runs it as it is)")
