"""torch's Transformer layers: TransformerEncoderLayer, TransformerDecoderLayer, the stacks
TransformerEncoder / TransformerDecoder and the whole Transformer, with torch's constructor arguments, submodule
names and weight layout (so a torch state_dict loads), built from MultiheadAttention, Linear,
LayerNorm and Dropout."""
from __future__ import annotations

import copy

import numpy as np

from . import functional as F
from .layers import Dropout, LayerNorm, Linear, MultiheadAttention
from .module import Module, ModuleList
from ..creation import tensor
from . import init

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation):
    if callable(activation):
        return activation
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation should be relu/gelu or a callable, not {activation!r}")
    return ACTIVATIONS[activation]


class _Block(Module):
    """What both layers share: the feed-forward block, residuals and the norm placement."""

    def _feed_forward_init(self, d_model, dim_feedforward, dropout, activation, norm_first,
                           layer_norm_eps, bias, norms):
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, f"dropout{self._norms}")(x)

    def _residuals(self, x, blocks):
        """x + block(norm(x)) per block (norm_first), else norm(x + block(x)), as torch."""
        for i, block in enumerate(blocks, 1):
            norm = getattr(self, f"norm{i}")
            x = x + block(norm(x)) if self.norm_first else norm(x + block(x))
        return x

    def _attend(self, attn, dropout, x, mem, mask, padding_mask, is_causal):
        out = attn(x, mem, mem, attn_mask=mask, key_padding_mask=padding_mask,
                   need_weights=False, is_causal=is_causal)[0]
        return dropout(out)


class TransformerEncoderLayer(_Block):
    """torch.nn.TransformerEncoderLayer: self-attention then a feed-forward block, each with a
    residual and a LayerNorm (after by default, before with norm_first=True).

    >>> import aneforge as af, aneforge.nn as nn
    >>> layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16,
    ...                                    batch_first=True)
    >>> layer(af.ones(2, 5, 8)).shape
    (2, 5, 8)
    """
    _norms = 2

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self._feed_forward_init(d_model, dim_feedforward, dropout, activation, norm_first,
                                layer_norm_eps, bias, self._norms)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        def sa(x):
            return self._attend(self.self_attn, self.dropout1, x, x, src_mask,
                                src_key_padding_mask, is_causal)
        return self._residuals(src, [sa, self._ff_block])


class TransformerDecoderLayer(_Block):
    """torch.nn.TransformerDecoderLayer: self-attention, attention over `memory` (the
    encoder's output), then a feed-forward block; residuals and LayerNorms as torch.

    >>> import aneforge as af, aneforge.nn as nn
    >>> layer = nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16,
    ...                                    batch_first=True)
    >>> layer(af.ones(2, 3, 8), af.ones(2, 5, 8)).shape
    (2, 3, 8)
    """
    _norms = 3

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first)
        self._feed_forward_init(d_model, dim_feedforward, dropout, activation, norm_first,
                                layer_norm_eps, bias, self._norms)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False):
        def sa(x):
            return self._attend(self.self_attn, self.dropout1, x, x, tgt_mask,
                                tgt_key_padding_mask, tgt_is_causal)

        def mha(x):
            return self._attend(self.multihead_attn, self.dropout2, x, memory, memory_mask,
                                memory_key_padding_mask, memory_is_causal)
        return self._residuals(tgt, [sa, mha, self._ff_block])


def _clones(layer: Module, n: int) -> ModuleList:
    return ModuleList(copy.deepcopy(layer) for _ in range(n))


class TransformerEncoder(Module):
    """torch.nn.TransformerEncoder: `num_layers` copies of `encoder_layer` (each with its own
    weights: `layers.0.`, `layers.1.`, ... as torch names them), then an optional `norm`.

    >>> import aneforge as af, aneforge.nn as nn
    >>> layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    >>> enc = nn.TransformerEncoder(layer, num_layers=2)
    >>> enc(af.ones(1, 4, 8)).shape, len(enc.layers)
    ((1, 4, 8), 2)
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """torch.nn.TransformerDecoder: `num_layers` copies of `decoder_layer`, then an optional
    `norm`.

    >>> import aneforge as af, aneforge.nn as nn
    >>> layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    >>> nn.TransformerDecoder(layer, 2)(af.ones(1, 3, 8), af.ones(1, 4, 8)).shape
    (1, 3, 8)
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, bool(tgt_is_causal), memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """torch.nn.Transformer: an encoder stack and a decoder stack, each ending in a LayerNorm,
    with torch's arguments, submodule names (`encoder.layers.0...`, `decoder.norm`) and its
    Xavier-uniform initialization of every matrix.

    >>> import aneforge as af, aneforge.nn as nn
    >>> model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
    ...                        dim_feedforward=16, batch_first=True)
    >>> mask = nn.Transformer.generate_square_subsequent_mask(3)
    >>> model(af.ones(2, 5, 8), af.ones(2, 3, 8), tgt_mask=mask).shape
    (2, 3, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        layer = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                     dropout=dropout, activation=activation, layer_norm_eps=layer_norm_eps,
                     batch_first=batch_first, norm_first=norm_first, bias=bias)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(**layer), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(**layer), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                            memory_key_padding_mask, tgt_is_causal, memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """A float [sz, sz] mask: 0 on and below the diagonal, -inf above (torch's)."""
        return tensor(np.triu(np.full((sz, sz), -np.inf), 1))
