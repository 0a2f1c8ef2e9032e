"""`Tensor.grad_fn`: torch's view of the gradient graph (`torch.autograd.graph.Node`).

aneforge's graph is the trace itself: a value computed from tensors that require grad is a
recorded MIL op whose sources are the op's inputs, and its gradient rule sits with the op
(aneforge/ops/). `grad_fn` shows that node as torch shows its own: named as torch names the
backward of the torch function that records the op (`mul` -> `MulBackward0`; an op torch has
no single function for keeps its MIL name), with `next_functions` pairing each input with its
own `grad_fn`, an `AccumulateGrad` for a leaf that requires grad, or None. It is read-only, for
printing and walking the graph, as the torch tutorials do; the walk `backward()` runs is
aneforge/autograd.py's.
"""
from __future__ import annotations

# The torch backward named by the torch function that records each MIL op (torch's own names,
# as `print(t.grad_fn)` shows them for the same function; torch 2.x).
TORCH_NAMES = {
    "add": "AddBackward0", "sub": "SubBackward0", "mul": "MulBackward0",
    "real_div": "DivBackward0", "pow": "PowBackward0", "matmul": "MmBackward0",
    "linear": "AddmmBackward0", "reshape": "ViewBackward0", "transpose": "PermuteBackward0",
    "expand_dims": "UnsqueezeBackward0", "squeeze": "SqueezeBackward1",
    "reduce_sum": "SumBackward0", "reduce_mean": "MeanBackward0", "reduce_max": "MaxBackward0",
    "relu": "ReluBackward0", "sigmoid": "SigmoidBackward0", "tanh": "TanhBackward0",
    "exp": "ExpBackward0", "log": "LogBackward0", "sqrt": "SqrtBackward0",
    "rsqrt": "RsqrtBackward0", "sin": "SinBackward0", "cos": "CosBackward0",
    "softmax": "SoftmaxBackward0", "gelu": "GeluBackward0", "silu": "SiluBackward0",
    "conv": "ConvolutionBackward0", "concat": "CatBackward0", "tile": "ExpandBackward0",
    "clip": "ClampBackward1", "maximum": "MaximumBackward0", "minimum": "MinimumBackward0",
    "select": "WhereBackward0", "slice_by_index": "SliceBackward0", "identity": "CloneBackward0",
    "cast": "ToCopyBackward0", "pad": "ConstantPadNdBackward0", "erf": "ErfBackward0",
    "leaky_relu": "LeakyReluBackward0",
}


class BackwardNode:
    """The `grad_fn` of a computed tensor: a recorded op seen as torch's autograd node.

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(2))
    >>> y = w * 3
    >>> y.grad_fn.name(), y.grad_fn.next_functions[0][0].variable is w
    ('MulBackward0', True)
    """

    def __init__(self, node, handle):
        self._node, self._handle = node, handle

    def name(self) -> str:
        return TORCH_NAMES.get(self._node.op, self._node.op)

    @property
    def next_functions(self) -> tuple:
        """((grad_fn, 0), ...) for each input of the op, in argument order: its grad_fn, an
        AccumulateGrad for a leaf that requires grad, None for an input without gradient."""
        return tuple((of(node, idx, self._handle, leaves=True), 0) for node, idx in self._node.args)

    @property
    def metadata(self) -> dict:
        return {}

    def __eq__(self, other) -> bool:           # two reads of one op's grad_fn are one node
        return type(other) is type(self) and other._node is self._node

    def __hash__(self) -> int:
        return id(self._node)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self._node):#x}>"


class AccumulateGrad(BackwardNode):
    """The node torch puts behind a leaf that requires grad: backward adds into
    `variable.grad`. `variable` is the leaf's handle where the leaf knows it (a Parameter, a
    tensor updated in place), else a new handle on the same leaf (the same value and `.grad`)."""

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    @property
    def variable(self):
        owner = self._node.owner() if self._node.owner is not None else None
        return owner if owner is not None else self._handle(self._node, 0)

    @property
    def next_functions(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self._node):#x}>"


def of(node, idx: int, handle, leaves: bool = False):
    """The grad_fn of output `idx` of `node` (`handle(node, idx)` makes a Tensor): None for a
    value without gradient and, unless `leaves` (next_functions), for a leaf."""
    if not node.requires_grad:
        return None
    if node.op is None:
        return AccumulateGrad(node, handle) if leaves else None
    return BackwardNode(node, handle)
