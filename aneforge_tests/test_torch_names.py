"""Every torch name the torch-parity issue lists exists on aneforge's matching surface, with
torch's argument names where the issue names an argument. (Values and gradients of each are
checked against torch in optable.py, test_nn.py, test_transformer.py and test_checkpoint.py.)"""
import inspect

import pytest
import torch

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F

SURFACES = {"af": (af, torch), "Tensor": (af.Tensor, torch.Tensor), "F": (F, torch.nn.functional),
            "nn": (nn, torch.nn)}

NAMES = """
F pad max_pool2d interpolate avg_pool2d conv_transpose2d conv1d scaled_dot_product_attention
F softplus leaky_relu elu normalize cosine_similarity group_norm batch_norm smooth_l1_loss
F hardtanh mish kl_div cross_entropy
af einsum isclose sort cummax cummin div roll scatter scatter_reduce tril triu meshgrid prod
af copysign flip logcumsumexp logsumexp cumprod cumsum diagonal gather save load linspace
af inference_mode erf bmm norm topk
Tensor type repeat add_ mul_ zero_ fill_ mT __mod__ __floordiv__ topk
nn CrossEntropyLoss MaxPool2d AvgPool2d MultiheadAttention ModuleDict Conv1d ConvTranspose2d
nn GroupNorm Dropout Embedding BCEWithLogitsLoss SmoothL1Loss HuberLoss KLDivLoss NLLLoss
nn TransformerEncoderLayer TransformerDecoderLayer TransformerEncoder
"""

# (surface, name) -> argument names the issue asks for, checked against torch's own signature.
ARGUMENTS = {
    ("af", "div"): ["rounding_mode"],
    ("F", "cross_entropy"): ["ignore_index", "label_smoothing"],
    ("nn", "Embedding"): ["padding_idx"],
    ("Tensor", "sum"): ["axis"],
    ("nn", "Module.register_buffer"): ["persistent"],
    ("nn", "Module.load_state_dict"): ["strict"],
    ("af", "load"): ["map_location", "weights_only"],
    ("nn", "TransformerEncoderLayer"): ["d_model", "nhead", "dim_feedforward", "dropout",
                                        "activation", "batch_first", "norm_first",
                                        "layer_norm_eps"],
    ("nn", "TransformerDecoderLayer"): ["d_model", "nhead", "dim_feedforward", "dropout",
                                        "activation", "batch_first", "norm_first",
                                        "layer_norm_eps"],
}


def rows():
    for line in NAMES.strip().splitlines():
        surface, *names = line.split()
        yield from ((surface, n) for n in names)


def lookup(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("surface,name", list(rows()), ids=[f"{s}.{n}" for s, n in rows()])
def test_the_issues_torch_names_exist(surface, name):
    ours, theirs = SURFACES[surface]
    assert hasattr(theirs, name), f"torch has no {surface}.{name}: fix the list"
    assert hasattr(ours, name), f"aneforge lacks {surface}.{name}"


def params(fn) -> set:
    fn = fn.__init__ if inspect.isclass(fn) else fn
    return set(inspect.signature(fn).parameters)


@pytest.mark.parametrize("key", list(ARGUMENTS), ids=[f"{s}.{n}" for s, n in ARGUMENTS])
def test_the_issues_argument_names_are_torchs(key):
    surface, name = key
    ours, theirs = SURFACES[surface]
    if surface == "Tensor" and name == "sum":     # torch's C signature: axis is an alias there
        assert "axis" in params(af.Tensor.sum)
        torch.ones(2).sum(axis=0)
        return
    assert set(ARGUMENTS[key]) <= params(lookup(ours, name))
    fn = lookup(theirs, name)
    try:
        assert set(ARGUMENTS[key]) <= params(fn)
    except ValueError:                            # a C builtin: its documented signature
        assert all(f"{arg}=" in fn.__doc__.split("\n", 3)[1] for arg in ARGUMENTS[key])


def test_aliases_and_operators_behave_as_torchs():
    x = af.tensor([[5.0, -7.0], [3.0, 1.0]])
    t = torch.tensor([[5.0, -7.0], [3.0, 1.0]])
    assert (x % 3).tolist() == (t % 3).tolist() and (x // 2).tolist() == (t // 2).tolist()
    assert x.sum(axis=1).tolist() == t.sum(axis=1).tolist()
    assert x.mT.tolist() == t.mT.tolist()
    assert af.div(x, 2, rounding_mode="floor").tolist() == \
        torch.div(t, 2, rounding_mode="floor").tolist()
    assert x.repeat(1, 2).tolist() == t.repeat(1, 2).tolist()
    assert x.type(af.int32).tolist() == t.type(torch.int32).tolist()
