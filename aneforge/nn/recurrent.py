"""Recurrent layers with torch's arguments, parameter names, weight layouts and initialization:
RNN (tanh or relu), LSTM (with `proj_size`) and GRU, stacked and bidirectional, and their
cells. A sequence unrolls into the step's ops (one program for a given sequence length, as
every op of a step lands in one), with the input projections of all steps done as one matmul
per layer and direction; gates are torch's: LSTM i, f, g, o; GRU r, z, n with
n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).

>>> import aneforge as af, aneforge.nn as nn
>>> lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(af.ones(3, 5, 8))
>>> out.shape, h.shape, c.shape
((3, 5, 16), (2, 3, 16), (2, 3, 16))
"""
from __future__ import annotations

import math

import numpy as np

from ..core.realization import carry
from ..creation import zeros
from ..errors import ShapeError
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter
from ..tensor.movement import cat, stack

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _param(*shape) -> Parameter:
    return Parameter(np.zeros(shape, np.float32))


def _rnn_step(x_proj, h, w_hh, b_hh, relu: bool):
    pre = x_proj + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def _lstm_step(x_proj, h, c, w_hh, b_hh, w_hr):
    i, f, g, o = (x_proj + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else F.linear(h, w_hr)), c


def _gru_step(x_proj, h, w_hh, b_hh):
    xr, xz, xn = x_proj.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (h - n)                  # (1 - z) * n + z * h


class RNNBase(Module):
    """The stacked, optionally bidirectional recurrence shared by RNN, LSTM and GRU."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"hidden_size and num_layers must be positive, got {hidden_size} "
                             f"and {num_layers}")
        if proj_size < 0 or proj_size and (mode != "LSTM" or proj_size >= hidden_size):
            raise ValueError("proj_size must be a positive number smaller than hidden_size, "
                             "and only LSTM has it" if proj_size else "proj_size must be >= 0")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gates = GATES[mode] * hidden_size
        out = proj_size or hidden_size
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:2 if bidirectional else 1]:
                inputs = input_size if layer == 0 else out * (2 if bidirectional else 1)
                shapes = [("weight_ih", (gates, inputs)), ("weight_hh", (gates, out))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    full = f"{name}_l{layer}{suffix}"
                    setattr(self, full, _param(*shape))
                    self._flat_weights_names.append(full)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's: every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Nothing to do: torch packs the weights into one buffer for cuDNN here."""

    def _weights(self, layer: int, suffix: str) -> tuple:
        get = lambda name: getattr(self, f"{name}_l{layer}{suffix}", None)   # noqa: E731
        return (get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"),
                get("weight_hr"))

    def _states(self, hx, batch: int, dtype):
        """(h0, c0) as [layers * directions, batch, size] (zeros when not given)."""
        d = self.num_layers * (2 if self.bidirectional else 1)
        out = self.proj_size or self.hidden_size
        if hx is None:
            state = lambda size: zeros(d, batch, size, dtype=dtype)  # noqa: E731
            return state(out), (state(self.hidden_size) if self.mode == "LSTM" else None)
        h0, c0 = hx if self.mode == "LSTM" else (hx, None)
        for name, t, size in (("h0", h0, out), ("c0", c0, self.hidden_size)):
            if t is not None and tuple(t.shape) != (d, batch, size):
                raise ShapeError(f"{type(self).__name__}: expected {name} of shape "
                                 f"{(d, batch, size)}, got {tuple(t.shape)}")
        return h0, c0

    def forward(self, input, hx=None):
        if input.dim() not in (2, 3):
            raise ShapeError(f"{type(self).__name__}: expected a 2-D (unbatched) or 3-D input, "
                             f"got {input.dim()}-D")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{type(self).__name__}: input.size(-1) must be equal to "
                             f"input_size. Expected {self.input_size}, got {input.shape[-1]}")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first
                                                   else input)
        if unbatched and hx is not None:
            hx = tuple(t.unsqueeze(1) for t in hx) if self.mode == "LSTM" else hx.unsqueeze(1)
        h0, c0 = self._states(hx, x.shape[1], x.dtype)
        hs, cs = [], []
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                x = F.dropout(x, self.dropout)
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:2 if self.bidirectional else 1]):
                k = layer * (2 if self.bidirectional else 1) + d
                seq, h, c = self._direction(x, self._weights(layer, suffix), h0[k],
                                            None if c0 is None else c0[k], reverse=d == 1)
                outs.append(seq)
                hs.append(h)
                cs.append(c)
            x = outs[0] if len(outs) == 1 else cat(outs, dim=-1)
        h_n = stack(hs)
        out = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        if unbatched:
            h_n = h_n.squeeze(1)
        states = (h_n,) if self.mode != "LSTM" else (h_n, stack(cs))
        if unbatched:
            states = states[:1] + tuple(s.squeeze(1) for s in states[1:])
        carry([s.ref for s in states])          # the next step reads them: computed with this one
        return (out, states[0]) if self.mode != "LSTM" else (out, states)

    def _direction(self, x, weights, h, c, reverse: bool):
        """One layer in one direction over x [L, N, in]: ([L, N, out], h_L, c_L)."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        proj = F.linear(x, w_ih, b_ih)                  # every step's input projection at once
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        out = [None] * x.shape[0]
        for t in steps:
            if self.mode == "LSTM":
                h, c = _lstm_step(proj[t], h, c, w_hh, b_hh, w_hr)
            elif self.mode == "GRU":
                h = _gru_step(proj[t], h, w_hh, b_hh)
            else:
                h = _rnn_step(proj[t], h, w_hh, b_hh, self.mode == "RNN_RELU")
            out[t] = h
        return stack(out), h, c

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN, h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu:
    `nonlinearity="relu"`), torch's arguments; returns (output, h_n).

    >>> import aneforge as af, aneforge.nn as nn
    >>> out, h = nn.RNN(4, 6, nonlinearity="relu")(af.ones(7, 2, 4))
    >>> out.shape, h.shape
    ((7, 2, 6), (1, 2, 6))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory, torch's gates (i, f, g, o), arguments and `proj_size`; returns
    (output, (h_n, c_n)).

    >>> import aneforge as af, aneforge.nn as nn
    >>> out, (h, c) = nn.LSTM(4, 6, bidirectional=True)(af.ones(7, 2, 4))
    >>> out.shape, h.shape
    ((7, 2, 12), (2, 2, 6))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size)


class GRU(RNNBase):
    """Gated recurrent unit, torch's gates (r, z, n) and arguments; returns (output, h_n).

    >>> import aneforge as af, aneforge.nn as nn
    >>> out, h = nn.GRU(4, 6, num_layers=2, batch_first=True)(af.ones(2, 7, 4))
    >>> out.shape, h.shape
    ((2, 7, 6), (2, 2, 6))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional)


class RNNCellBase(Module):
    """One step of a recurrence: torch's cell parameters (weight_ih, weight_hh, bias_ih,
    bias_hh) and initialization; input [N, in] or unbatched [in]."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, gates: int):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = _param(gates * hidden_size, input_size)
        self.weight_hh = _param(gates * hidden_size, hidden_size)
        self.bias_ih = _param(gates * hidden_size) if bias else None
        self.bias_hh = _param(gates * hidden_size) if bias else None
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def _batched(self, input, hx):
        if input.dim() not in (1, 2):
            raise ShapeError(f"{type(self).__name__}: expected a 1-D (unbatched) or 2-D input, "
                             f"got {input.dim()}-D")
        if input.dim() == 1:
            input = input.unsqueeze(0)
            hx = None if hx is None else (tuple(t.unsqueeze(0) for t in hx)
                                          if isinstance(hx, tuple) else hx.unsqueeze(0))
        return input, hx

    def _zeros(self, input):
        return zeros(input.shape[0], self.hidden_size, dtype=input.dtype)

    def forward(self, input, hx=None):
        one = input.dim() == 1
        x, hx = self._batched(input, hx)
        out = self._step(F.linear(x, self.weight_ih, self.bias_ih), hx, x)
        if not one:
            return out
        return tuple(t.squeeze(0) for t in out) if isinstance(out, tuple) else out.squeeze(0)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu).

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.RNNCell(4, 6)(af.ones(2, 4)).shape
    (2, 6)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1)
        self.nonlinearity = nonlinearity

    def _step(self, proj, h, x):
        return _rnn_step(proj, self._zeros(x) if h is None else h, self.weight_hh, self.bias_hh,
                         self.nonlinearity == "relu")


class LSTMCell(RNNCellBase):
    """One LSTM step: returns (h', c').

    >>> import aneforge as af, aneforge.nn as nn
    >>> h, c = nn.LSTMCell(4, 6)(af.ones(2, 4))
    >>> h.shape, c.shape
    ((2, 6), (2, 6))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 4)

    def _step(self, proj, hx, x):
        h, c = (self._zeros(x), self._zeros(x)) if hx is None else hx
        return _lstm_step(proj, h, c, self.weight_hh, self.bias_hh, None)


class GRUCell(RNNCellBase):
    """One GRU step: returns h'.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.GRUCell(4, 6)(af.ones(2, 4)).shape
    (2, 6)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 3)

    def _step(self, proj, h, x):
        return _gru_step(proj, self._zeros(x) if h is None else h, self.weight_hh, self.bias_hh)
