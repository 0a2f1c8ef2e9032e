"""torch.nn-compatible modules, functional ops, initializers and utilities."""
import sys

from .. import absent
from . import functional, init, utils
from . import functional as F  # noqa: N812  (torch's spelling)
from .layers import (ELU, GELU, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, AvgPool3d, BatchNorm1d,
                     BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv1d, Conv2d, Conv3d,
                     ConvTranspose2d, CrossEntropyLoss, Dropout, Embedding, Flatten, GroupNorm,
                     Hardtanh, HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU,
                     Linear, LogSoftmax, MaxPool1d, MaxPool2d, MaxUnpool2d, Mish, MSELoss,
                     MultiheadAttention, NLLLoss, ReLU, RMSNorm, Sigmoid, SiLU, SmoothL1Loss,
                     Softmax, Softmin, Softplus, Tanh, Upsample)
from .module import Module, ModuleDict, ModuleList, Sequential
from .parameter import Parameter
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from . import parallel
from .parallel import DataParallel
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)

__all__ = ["functional", "F", "init", "utils", "Module", "ModuleList", "ModuleDict", "Sequential",
           "Parameter", "Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "Embedding",
           "LayerNorm", "RMSNorm", "GroupNorm", "Dropout", "ReLU", "GELU", "SiLU", "Tanh",
           "Sigmoid", "Softmax", "LogSoftmax", "Identity", "Flatten", "LeakyReLU", "ELU",
           "Softplus", "Hardtanh", "Mish", "MaxPool1d", "MaxPool2d", "MaxUnpool2d", "AvgPool1d",
           "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool2d", "Upsample", "CrossEntropyLoss",
           "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCEWithLogitsLoss",
           "BCELoss", "Softmin", "MultiheadAttention", "BatchNorm1d", "BatchNorm2d", "KLDivLoss",
           "TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerDecoder", "Transformer", "parallel", "DataParallel", "RNNBase", "RNN", "LSTM",
           "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def __getattr__(name: str):
    """A torch.nn name aneforge lacks: an AttributeError saying so, and what to use instead."""
    raise absent.error("nn", name, sys.modules[__name__], {"F": functional})
