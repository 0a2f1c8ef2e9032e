"""torch.nn-compatible modules, functional ops, initializers and utilities."""
from . import functional, init, utils
from . import functional as F  # noqa: N812  (torch's spelling)
from .layers import (GELU, Conv2d, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear,
                     LogSoftmax, ReLU, RMSNorm, Sigmoid, SiLU, Softmax, Tanh)
from .module import Module, ModuleList, Sequential
from .parameter import Parameter

__all__ = ["functional", "F", "init", "utils", "Module", "ModuleList", "Sequential", "Parameter",
           "Linear", "Conv2d", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "ReLU", "GELU",
           "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Identity", "Flatten"]
