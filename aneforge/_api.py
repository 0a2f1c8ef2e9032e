"""The one table of aneforge's torch names, and the writer of the surfaces.

Each row of TABLE names a torch function over tensors and says, in its columns:

- **home**: where aneforge implements it: `Tensor` (a method of the class), `functions`
  (aneforge/functions.py) or `F` (aneforge/nn/functional.py);
- **surfaces**: where torch spells it: `torch.X` (af.X), `torch.Tensor.X` (Tensor.X) and
  `torch.nn.functional.X` (F.X). aneforge has the name on exactly those, and
  aneforge_tests/test_api_surfaces.py checks them against torch itself. A surface marked `*` has
  a hand-written adapter, because torch's signature differs there (torch.embedding(weight,
  indices) against F.embedding(input, weight)): in aneforge/adapters.py for torch.X, in the
  surface's own module otherwise;
- **runs as**: how it runs, for docs/torch_coverage.md: the one MIL op it records (native),
  `decomposed` (several ops), `host` (a value read back, or a static fact) or `no-op` (only
  the handle changes); a host or no-op row ends with `-- why`, the page's note;
- **ATen ops**: the torch.export overloads (`add.Tensor` for `aten.add.Tensor`) that
  `af.from_torch` runs with this row's function, called with the ATen op's arguments; an
  overload written `op:adapter` runs aneforge/torch_import.py's function `adapter` instead,
  where the ATen signature differs from aneforge's (an argument dropped or reordered).

An indented line continues the row above it. ATEN_ONLY lists the ATen ops torch.export emits
that are no torch function of their own (slices, aliases, its runtime checks), and ABSENT
(kept in aneforge/absent.py, below every layer, so each surface's missing-name error can read
it) the torch names aneforge leaves out on purpose, with why; the coverage page shows both tables'
contents, and torch_import.py reads its routes from TABLE and ATEN_ONLY only.

Every surface but a hand-written adapter binds the home's implementation by a plain statement
that `python -m aneforge._api` writes into the marked blocks of

    aneforge/forwarders.py     af.X of a Tensor method: a def forwarding to the method
    aneforge/functions.py      the forwarders imported; __all__
    aneforge/nn/functional.py  F.X homed elsewhere: imported from functions; __all__
    aneforge/__init__.py       af.X: imported from functions and nn.functional; __all__

so IDEs, static analyzers and help() see every name. Tensor.X is always a def (or a class-body
assignment) in the Tensor class or a base class of it, written by hand: the methods are the
implementations. Functions that make tensors or set state (af.zeros, af.manual_seed,
af.no_grad, ...) are on af only, as in torch, and imported by hand in __init__.py.

This module imports nothing of aneforge at import time but absent.py (a table below every
layer), so any module may read it without an import cycle: implementations are named by
string (`Tensor.exp`, `functions.cat`, `F.silu`) and resolved by the reader (torch_import.routes()). Only the generator imports Tensor, to copy
each forwarded method's signature, found with getattr and inspect wherever the method is
defined (the class or a base of it).
"""
from __future__ import annotations

import inspect
import pathlib
import re
from typing import NamedTuple

from .absent import ABSENT, ABSENT_TABLE, lines as _lines  # noqa: F401  (ABSENT: read here)

SURFACES = ("torch", "Tensor", "F")

#  name               home      surfaces        runs as         ATen ops (overload[:adapter])
TABLE = """
abs                   Tensor    torch Tensor    abs             abs.default
acos                  Tensor    torch Tensor    decomposed      acos.default
acosh                 Tensor    torch Tensor    decomposed      acosh.default
adaptive_avg_pool2d   F         F               decomposed      adaptive_avg_pool2d.default
                                                                _adaptive_avg_pool2d.default
add                   Tensor    torch Tensor    add             add.Tensor
                                                                add.Scalar
add_                  Tensor    Tensor          add
addcdiv               Tensor    torch Tensor    decomposed
addcmul               Tensor    torch Tensor    decomposed
addmm                 Tensor    torch Tensor    decomposed      addmm.default
all                   Tensor    torch Tensor    decomposed
allclose              Tensor    torch Tensor    host
    -- a Python bool: the comparison runs as a program, the answer is read back
amax                  Tensor    torch Tensor    reduce_max      amax.default:_amax
amin                  Tensor    torch Tensor    reduce_min      amin.default:_amin
any                   Tensor    torch Tensor    decomposed      any.default
                                                                any.dim
                                                                any.dims:_any
argmax                Tensor    torch Tensor    reduce_argmax   argmax.default
argmin                Tensor    torch Tensor    reduce_argmin   argmin.default
argsort               Tensor    torch Tensor    decomposed
argwhere              Tensor    torch Tensor    host
    -- the row count depends on the values: nonzero's host segment
asin                  Tensor    torch Tensor    decomposed      asin.default
asinh                 Tensor    torch Tensor    decomposed      asinh.default
atan                  Tensor    torch Tensor    decomposed      atan.default
atanh                 Tensor    torch Tensor    decomposed      atanh.default
avg_pool1d            F         torch F         decomposed      avg_pool1d.default:_avg_pool1d
avg_pool2d            F         F               decomposed      avg_pool2d.default:_avg_pool2d
avg_pool3d            F         F               decomposed      avg_pool3d.default:_avg_pool3d
backward              Tensor    Tensor          host
    -- records the gradient ops (autograd); they run with the next realization
batch_norm            F         torch* F        decomposed      batch_norm.default:_batch_norm
                                                                _native_batch_norm_legit_functional.default:_batch_norm_train
                                                                _native_batch_norm_legit.default:_batch_norm_legit
                                                                _native_batch_norm_legit.no_stats:_batch_norm_no_stats
                                       _native_batch_norm_legit_no_training.default:_batch_norm_eval
bernoulli             Tensor    torch Tensor    host
    -- drawn on the host from the realized probabilities; enters programs as an input
bernoulli_            Tensor    Tensor          host
    -- a host draw (see bernoulli)
binary_cross_entropy  F         F               decomposed
binary_cross_entropy_with_logits F         torch* F        decomposed
bitwise_and           Tensor    torch Tensor    decomposed      bitwise_and.Tensor
                                                                bitwise_and.Scalar
bitwise_left_shift    Tensor    torch Tensor    decomposed
bitwise_not           Tensor    torch Tensor    decomposed      bitwise_not.default
bitwise_or            Tensor    torch Tensor    decomposed      bitwise_or.Tensor
                                                                bitwise_or.Scalar
bitwise_right_shift   Tensor    torch Tensor    decomposed
bitwise_xor           Tensor    torch Tensor    decomposed      bitwise_xor.Tensor
                                                                bitwise_xor.Scalar
bmm                   Tensor    torch Tensor    matmul          bmm.default
bool                  Tensor    Tensor          cast
cat                   functions torch           concat          cat.default
ceil                  Tensor    torch Tensor    decomposed      ceil.default
celu                  F         torch F         decomposed
chunk                 Tensor    torch Tensor    split           chunk.default
clamp                 Tensor    torch Tensor    clip            clamp.default
                                                                clamp.Tensor
clamp_                Tensor    torch Tensor    clip
clamp_max             Tensor    torch Tensor    decomposed
clamp_min             Tensor    torch Tensor    decomposed
clip                  Tensor    torch Tensor    clip
clone                 Tensor    torch Tensor    identity        clone.default:_same
concat                functions torch           concat
concatenate           functions torch           concat
contiguous            Tensor    Tensor          no-op           contiguous.default:_same
    -- tensors are always contiguous
conv1d                F         torch F         decomposed
conv2d                F         torch F         decomposed      conv2d.default:_conv2d
                                                                convolution.default:_convolution
conv3d                F         torch F         decomposed
conv_transpose2d      F         torch F         decomposed
conv_transpose3d      F         torch F         decomposed
copy_                 Tensor    Tensor          no-op           copy.default:_copy
    -- the handle takes `src`'s value
copysign              Tensor    torch Tensor    decomposed
cos                   Tensor    torch Tensor    cos             cos.default
cosh                  Tensor    torch Tensor    decomposed      cosh.default
cosine_similarity     F         torch F         decomposed
count_nonzero         Tensor    torch Tensor    decomposed
cpu                   Tensor    Tensor          no-op
    -- one device
cross_entropy         F         F               decomposed      cross_entropy_loss.default:_cross_entropy
cuda                  Tensor    Tensor          host
    -- raises: no CUDA device (use "cpu", "mps" or "ane", or drop the call)
cummax                Tensor    torch Tensor    decomposed
cummin                Tensor    torch Tensor    decomposed
cumprod               Tensor    torch Tensor    decomposed
cumsum                Tensor    torch Tensor    decomposed      cumsum.default:_cumsum
detach                Tensor    torch Tensor    no-op           detach.default
    -- a new handle without gradient history
diag                  Tensor    torch Tensor    decomposed
diagonal              Tensor    torch Tensor    decomposed      diagonal.default
dim                   Tensor    Tensor          host
    -- the static rank (no program)
div                   Tensor    torch Tensor    real_div        div.Tensor
                                                                div.Scalar
                                                                div.Tensor_mode
                                                                div.Scalar_mode
div_                  Tensor    Tensor          real_div
dropout               F         torch* F        decomposed      dropout.default
                                                                native_dropout.default:_native_dropout
einsum                functions torch           decomposed
elu                   F         F               decomposed      elu.default:_elu
embedding             F         torch* F        decomposed      embedding.default:_embedding
eq                    Tensor    torch Tensor    equal           eq.Tensor
                                                                eq.Scalar
erf                   Tensor    torch Tensor    erf             erf.default
exp                   Tensor    torch Tensor    exp             exp.default
exponential_          Tensor    Tensor          host
    -- a host draw (see bernoulli)
exp2                  Tensor    torch Tensor    pow             exp2.default
expand                Tensor    Tensor          tile            expand.default:_expand
expand_as             Tensor    Tensor          tile
expm1                 Tensor    torch Tensor    decomposed      expm1.default
fill_                 Tensor    torch Tensor    decomposed      fill.Scalar:_fill
flatten               Tensor    torch Tensor    reshape         flatten.using_ints
flip                  Tensor    torch Tensor    decomposed      flip.default
float                 Tensor    Tensor          cast
floor                 Tensor    torch Tensor    decomposed      floor.default
floor_divide          Tensor    torch Tensor    decomposed
fmod                  Tensor    torch Tensor    decomposed      fmod.Tensor
                                                                fmod.Scalar
gather                Tensor    torch Tensor    decomposed      gather.default:_gather
ge                    Tensor    torch Tensor    greater_equal   ge.Tensor
                                                                ge.Scalar
gelu                  F         F               gelu            gelu.default
group_norm            F         torch F         decomposed      native_group_norm.default:_group_norm_stats
gt                    Tensor    torch Tensor    greater         gt.Tensor
                                                                gt.Scalar
half                  Tensor    Tensor          cast
hardsigmoid           F         F               decomposed
hardswish             F         F               decomposed
hardtanh              F         F               clip            hardtanh.default
huber_loss            F         F               decomposed
index_put             Tensor    torch Tensor    decomposed      index_put.default
index_put_            Tensor    torch Tensor    decomposed      index_put_.default
index_select          Tensor    torch Tensor    decomposed      index_select.default
int                   Tensor    Tensor          cast
interpolate           F         F               decomposed      upsample_bilinear2d.vec:_upsample_bilinear
                                                                upsample_nearest2d.vec:_upsample_nearest
isclose               Tensor    torch Tensor    decomposed
isfinite              Tensor    torch Tensor    decomposed      isfinite.default
isinf                 Tensor    torch Tensor    decomposed      isinf.default
isnan                 Tensor    torch Tensor    not_equal       isnan.default
item                  Tensor    Tensor          host            _local_scalar_dense.default
    -- reads one value back to Python
kl_div                F         torch* F        decomposed
l1_loss               F         F               decomposed
layer_norm            F         torch F         decomposed      layer_norm.default:_layer_norm
                                                                native_layer_norm.default:_layer_norm_stats
le                    Tensor    torch Tensor    less_equal      le.Tensor
                                                                le.Scalar
leaky_relu            F         F               leaky_relu      leaky_relu.default
lerp                  Tensor    torch Tensor    decomposed
linear                F         F               decomposed      linear.default
log                   Tensor    torch Tensor    log             log.default
log10                 Tensor    torch Tensor    decomposed      log10.default
log1p                 Tensor    torch Tensor    decomposed      log1p.default
log2                  Tensor    torch Tensor    decomposed      log2.default
log_softmax           Tensor    torch Tensor F  decomposed      log_softmax.int:_log_softmax
                                                                _log_softmax.default:_log_softmax
logaddexp             Tensor    torch Tensor    decomposed      logaddexp.default
logaddexp2            Tensor    torch Tensor    decomposed      logaddexp2.default
logcumsumexp          Tensor    torch Tensor    decomposed
logical_and           Tensor    torch Tensor    decomposed      logical_and.default
logical_not           Tensor    torch Tensor    logical_not     logical_not.default
logical_or            Tensor    torch Tensor    decomposed      logical_or.default
logical_xor           Tensor    torch Tensor    decomposed      logical_xor.default
logsigmoid            F         F               decomposed
logsumexp             Tensor    torch Tensor    decomposed
long                  Tensor    Tensor          cast
lt                    Tensor    torch Tensor    less            lt.Tensor
                                                                lt.Scalar
masked_fill           Tensor    torch Tensor    select          masked_fill.Scalar
masked_scatter        Tensor    torch Tensor    host            masked_scatter.default
    -- the source positions are read from the mask on the host; values move on the ANE
masked_select         Tensor    torch Tensor    host            masked_select.default
    -- the positions are found on the host (a host segment); the gather runs on the ANE
matmul                Tensor    torch Tensor    matmul          matmul.default mm.default
max                   Tensor    torch Tensor    reduce_max      max.dim
max_pool1d            F         torch F         decomposed
max_pool2d            F         torch F         decomposed      max_pool2d.default:_max_pool2d
                                                                max_pool2d_with_indices.default:_max_pool2d_with_indices
max_unpool2d          F         F               decomposed
maximum               Tensor    torch Tensor    maximum         maximum.default
mean                  Tensor    torch Tensor    reduce_mean     mean.dim:_mean mean.default:_mean
meshgrid              functions torch           decomposed
min                   Tensor    torch Tensor    reduce_min      min.dim
minimum               Tensor    torch Tensor    minimum         minimum.default
mish                  F         F               decomposed
mm                    Tensor    torch Tensor    matmul
movedim               Tensor    torch Tensor    transpose
mse_loss              F         F               decomposed
mul                   Tensor    torch Tensor    mul             mul.Tensor
                                                                mul.Scalar
mul_                  Tensor    Tensor          mul
multinomial           Tensor    torch Tensor    host
    -- drawn on the host from the realized weights; the result (a static shape) is an input
multiply              Tensor    torch Tensor    mul
nan_to_num            Tensor    torch Tensor    decomposed
narrow                Tensor    torch Tensor    slice_by_index
ne                    Tensor    torch Tensor    not_equal       ne.Tensor
                                                                ne.Scalar
neg                   Tensor    torch Tensor    decomposed      neg.default
negative              Tensor    torch Tensor    decomposed
nelement              Tensor    Tensor          host
    -- the static element count (no program)
new_empty             Tensor    Tensor          host            new_empty.default
    -- a new leaf made on the host (zeros), an input of the programs that read it
new_full              Tensor    Tensor          host            new_full.default
    -- a new leaf made on the host, an input of the programs that read it
new_ones              Tensor    Tensor          host            new_ones.default
    -- a new leaf made on the host, an input of the programs that read it
new_tensor            Tensor    Tensor          host
    -- a copy of host data as a new leaf
new_zeros             Tensor    Tensor          host            new_zeros.default
    -- a new leaf made on the host, an input of the programs that read it
nll_loss              F         F               decomposed
nonzero               Tensor    torch Tensor    host            nonzero.default
    -- the result's shape depends on the values: a host segment between ANE segments
norm                  Tensor    torch Tensor    decomposed
normal_               Tensor    Tensor          host
    -- a host draw from the generator, entering programs as an input
normalize             F         F               decomposed
numel                 Tensor    torch Tensor    host            sym_numel.default:_sym_numel
    -- the static element count (no program)
numpy                 Tensor    Tensor          host
    -- reads the values back as a numpy array
one_hot               F         F               decomposed
outer                 Tensor    torch Tensor    decomposed
pad                   F         F               pad             constant_pad_nd.default:_pad
                                                                reflection_pad1d.default:_reflection_pad
                                                                reflection_pad2d.default:_reflection_pad
                                                                reflection_pad3d.default:_reflection_pad
                                                                replication_pad2d.default:_replication_pad
                                                                replication_pad3d.default:_replication_pad
permute               Tensor    torch Tensor    transpose       permute.default
pow                   Tensor    torch Tensor    pow             pow.Tensor_Scalar
                                                                pow.Tensor_Tensor
                                                                pow.Scalar:_rpow
prod                  Tensor    torch Tensor    decomposed      prod.default:_prod
                                                                prod.dim_int:_prod
random_               Tensor    Tensor          host
    -- a host draw (see bernoulli)
reciprocal            Tensor    torch Tensor    decomposed      reciprocal.default
relu                  Tensor    torch Tensor F* relu            relu.default
relu6                 F         F               clip
remainder             Tensor    torch Tensor    decomposed      remainder.Tensor
                                                                remainder.Scalar
repeat                Tensor    Tensor          tile            repeat.default
repeat_interleave     Tensor    torch Tensor    decomposed      repeat_interleave.self_int
requires_grad_        Tensor    Tensor          no-op
    -- a leaf's flag
reshape               Tensor    torch Tensor    reshape         reshape.default _unsafe_view.default
rms_norm              F         torch F         decomposed
roll                  Tensor    torch Tensor    decomposed
round                 Tensor    torch Tensor    decomposed      round.default round.decimals
rsqrt                 Tensor    torch Tensor    rsqrt           rsqrt.default
scaled_dot_product_attention F         F               scaled_dot_product_attention
                                                                scaled_dot_product_attention.default
scatter               Tensor    torch Tensor    decomposed      scatter.src
                                                                scatter.value:_scatter_value
scatter_add           Tensor    torch Tensor    decomposed      scatter_add.default
scatter_reduce        Tensor    torch Tensor    decomposed      scatter_reduce.two
select                Tensor    torch Tensor    decomposed      select.int
selu                  F         torch F         decomposed
set_                  Tensor    Tensor          no-op
    -- the handle takes another value
sigmoid               Tensor    torch Tensor F  sigmoid         sigmoid.default
sign                  Tensor    torch Tensor    decomposed      sign.default
silu                  F         F               silu            silu.default
sin                   Tensor    torch Tensor    sin             sin.default
sinh                  Tensor    torch Tensor    decomposed      sinh.default
size                  Tensor    Tensor          host            sym_size.int:_sym_size
    -- the static shape (no program)
smooth_l1_loss        F         F               decomposed
softmax               Tensor    torch Tensor F  softmax         softmax.int:_softmax
                                                                _softmax.default:_softmax
softmin               F         F               decomposed
softplus              F         F               decomposed
softsign              F         F               decomposed
sort                  Tensor    torch Tensor    decomposed      sort.default:_sort
split                 Tensor    torch Tensor    split           split.Tensor
                                                                split_with_sizes.default
sqrt                  Tensor    torch Tensor    sqrt            sqrt.default
square                Tensor    torch Tensor    mul
squeeze               Tensor    torch Tensor    squeeze         squeeze.dim squeeze.dims
stack                 functions torch           decomposed      stack.default
std                   Tensor    torch Tensor    decomposed
std_mean              functions torch           decomposed
sub                   Tensor    torch Tensor    sub             sub.Tensor
                                                                sub.Scalar
sub_                  Tensor    Tensor          sub
subtract              Tensor    torch Tensor    sub
sum                   Tensor    torch Tensor    reduce_sum      sum.dim_IntList:_sum
                                                                sum.default:_sum
swapaxes              Tensor    torch Tensor    transpose
t                     Tensor    torch Tensor    transpose       t.default
tan                   Tensor    torch Tensor    decomposed      tan.default
tanh                  Tensor    torch Tensor F  tanh            tanh.default
tile                  Tensor    torch Tensor    tile
to                    Tensor    Tensor          cast            to.dtype:_to
                                                                _to_copy.default:_to_copy
tolist                Tensor    Tensor          host
    -- reads the values back to Python
topk                  Tensor    torch Tensor    decomposed      topk.default
transpose             Tensor    torch Tensor    transpose       transpose.int
tril                  Tensor    torch Tensor    decomposed
triu                  Tensor    torch Tensor    decomposed
true_divide           Tensor    torch Tensor    real_div
trunc                 Tensor    torch Tensor    decomposed      trunc.default
type                  Tensor    Tensor          host
    -- with no argument: the type string (no program); with a dtype: a cast
type_as               Tensor    Tensor          cast
unbind                Tensor    torch Tensor    decomposed
unflatten             Tensor    torch Tensor    reshape         unflatten.int
unique                Tensor    torch Tensor    host
    -- the number of distinct values sets the shape: a host segment (numpy)
unfold                Tensor    Tensor F*       decomposed      unfold.default
uniform_              Tensor    Tensor          host
    -- a host draw (see normal_)
unsqueeze             Tensor    torch Tensor    expand_dims     unsqueeze.default
var                   Tensor    torch Tensor    decomposed      var.dim:_var
                                                                var.correction:_var_correction
var_mean              functions torch           decomposed
view                  Tensor    Tensor          reshape         view.default
view_as               Tensor    Tensor          reshape
where                 functions torch Tensor*   select          where.self
zero_                 Tensor    torch Tensor    decomposed
"""

# ATen ops torch.export emits that are no torch function of their own: each runs torch_import.py's
# adapter, or `skip` (a runtime check torch.export inserts, which records nothing).
#  ATen op                        adapter
ATEN_ONLY = """
slice.Tensor                      _slice
alias.default                     _same
lift_fresh_copy.default           _same
_assert_tensor_metadata.default   skip
_assert_scalar.default            skip
arange.default                    _arange
arange.start                      _arange
arange.start_step                 _arange
full.default                      _full
full_like.default                 _full_like
empty.memory_format               _empty
empty_strided.default             _empty
scalar_tensor.default             _scalar_tensor
rand.default                      _rand
randn.default                     _randn
randperm.default                  _randperm
index.Tensor                      _index
slice_scatter.default             _slice_scatter
select_scatter.default            _select_scatter
sym_stride.int                    _sym_stride
sym_storage_offset.default        _sym_storage_offset
sym_is_contiguous.default         _sym_is_contiguous
"""


# torch's Core ATen opset (the ops torch tags `core`: what `ep.run_decompositions()` lowers to)
# that have no route above, each with its kind and why. docs/torch_coverage.md lists every core
# op as routed (its row) or as one of these; aneforge_tests/test_from_torch_core.py checks this
# list against torch's own. Kinds: `backward` (a gradient op: it appears only in joint
# forward-backward graphs; from_torch differentiates the forward with aneforge's autograd),
# `absent` (aneforge has no function that computes it), `todo` (aneforge computes it, the route is
# not written yet).
#  ATen op                                     kind      why
CORE_ATEN_UNROUTED = """
_adaptive_avg_pool2d_backward.default          backward  adaptive_avg_pool2d's gradient
avg_pool2d_backward.default                    backward  avg_pool2d's gradient
convolution_backward.default                   backward  convolution's gradient
embedding_dense_backward.default               backward  embedding's gradient
max_pool2d_with_indices_backward.default       backward  max_pool2d's gradient
native_group_norm_backward.default             backward  group_norm's gradient
native_layer_norm_backward.default             backward  layer_norm's gradient
_adaptive_avg_pool3d.default                   absent    no adaptive_avg_pool3d
_cdist_forward.default                         absent    no cdist
adaptive_avg_pool1d.default                    absent    no adaptive_avg_pool1d
resize_.default                                absent    no storage to resize in place: values are immutable, a new shape is a new tensor
_embedding_bag.default                         absent    no embedding_bag
_fft_c2r.default                               absent    no complex dtype, no FFT
_fft_r2c.default                               absent    no complex dtype, no FFT
_pdist_forward.default                         absent    no pdist
as_strided.default                             absent    tensors have no strides: no strided view
atan2.default                                  absent    no atan2
atan2.out                                      absent    an out= variant, and no atan2
col2im.default                                 absent    no fold (col2im)
grid_sampler_2d.default                        absent    no grid_sample
max_pool3d_with_indices.default                absent    no max_pool3d
"""

# Doctest bodies for the generated af.X forwarders (after `>>> import aneforge as af`).
EXAMPLES = {
    "add": ">>> af.add(af.tensor([1.0, 2.0]), 1.0, alpha=2).tolist()\n[3.0, 4.0]",
    "all": ">>> af.all(af.tensor([True, False])).item()\nFalse",
    "any": ">>> af.any(af.tensor([True, False])).item()\nTrue",
    "clone": ">>> af.clone(af.tensor([1.0, 2.0])).tolist()\n[1.0, 2.0]",
    "detach": (">>> w = af.ones(2, requires_grad=True)\n"
               ">>> af.detach(w * 2).requires_grad\nFalse"),
    "div": ">>> af.div(af.tensor([1.0, 3.0]), 2).tolist()\n[0.5, 1.5]",
    "eq": ">>> af.eq(af.tensor([1, 2]), 2).tolist()\n[False, True]",
    "erf": ">>> af.erf(af.tensor([0.0, 3.0])).tolist()\n[0.0, 1.0]",
    "ge": ">>> af.ge(af.tensor([1, 2]), 2).tolist()\n[False, True]",
    "gt": ">>> af.gt(af.tensor([1, 2]), 1).tolist()\n[False, True]",
    "le": ">>> af.le(af.tensor([1, 2]), 1).tolist()\n[True, False]",
    "logical_not": ">>> af.logical_not(af.tensor([True, False])).tolist()\n[False, True]",
    "lt": ">>> af.lt(af.tensor([1, 2]), 2).tolist()\n[True, False]",
    "masked_fill": (">>> x = af.tensor([-1.0, 2.0])\n"
                    ">>> af.masked_fill(x, x < 0, 0.0).tolist()\n[0.0, 2.0]"),
    "movedim": ">>> af.movedim(af.zeros(2, 3, 4), 0, -1).shape\n(3, 4, 2)",
    "mul": ">>> af.mul(af.tensor([1.0, 2.0]), 3).tolist()\n[3.0, 6.0]",
    "narrow": ">>> af.narrow(af.arange(5), 0, 1, 3).tolist()\n[1, 2, 3]",
    "ne": ">>> af.ne(af.tensor([1, 2]), 2).tolist()\n[True, False]",
    "numel": ">>> af.numel(af.zeros(2, 3))\n6",
    "std": ">>> af.std(af.tensor([1.0, 3.0])).item()\n1.4140625",
    "sub": ">>> af.sub(af.tensor([1.0, 2.0]), 1.0).tolist()\n[0.0, 1.0]",
    "swapaxes": ">>> af.swapaxes(af.zeros(2, 3), 0, 1).shape\n(3, 2)",
    "unbind": ">>> [t.tolist() for t in af.unbind(af.tensor([[1, 2], [3, 4]]), 1)]\n[[1, 3], [2, 4]]",
    "var": ">>> af.var(af.tensor([1.0, 3.0])).item()\n2.0",
}

# torch's name for the tensor argument where it is not `input`.
FIRST_ARGUMENT = {"split": "tensor"}


# The "runs as" words that are not a MIL op name, and how the coverage page says them.
KINDS = {"decomposed": "decomposed", "host": "host", "no-op": "no op"}


class Row(NamedTuple):
    name: str
    home: str                   # "Tensor", "functions" or "F"
    surfaces: tuple[str, ...]   # where torch spells the name: "torch", "Tensor", "F"
    adapted: frozenset[str]     # surfaces with a hand-written adapter (torch's signature differs)
    runs: str                   # the one MIL op it records, or a word of KINDS
    note: str                   # for host and no-op rows: why no program runs
    aten: tuple[tuple[str, str], ...]   # (ATen overload without "aten.", adapter or "")

    @property
    def kind(self) -> str:
        """How the coverage page classifies it: native, decomposed, host or no op."""
        return KINDS.get(self.runs, "native")

    @property
    def implementation(self) -> str:
        """The implementation's name on its home: `Tensor.exp`, `functions.cat`, `F.silu`."""
        return f"{self.home}.{self.name}"


def _row(line: str) -> Row:
    fields, _, note = line.partition(" -- ")
    name, home, *rest = fields.split()
    n = next((i for i, word in enumerate(rest) if word.rstrip("*") not in SURFACES), len(rest))
    surfaces, (runs, *aten) = rest[:n], rest[n:] or [""]
    if home not in ("Tensor", "functions", "F") or not runs or \
            bool(note) != (runs in ("host", "no-op")):
        raise ValueError(f"_api.TABLE: bad row {line!r}: a name, its home (Tensor, functions or "
                         f"F), surfaces, how it runs and ATen ops; a host or no-op row (only) "
                         f"ends with `-- why`")
    return Row(name, home, tuple(s.rstrip("*") for s in surfaces),
               frozenset(s.rstrip("*") for s in surfaces if s.endswith("*")), runs, note,
               tuple(_overload(op) for op in aten))


def _overload(op: str) -> tuple[str, str]:
    overload, _, adapter = op.partition(":")
    return overload, adapter


ROWS = tuple(_row(line) for line in _lines(TABLE))


def on(surface: str) -> list[Row]:
    return [r for r in ROWS if surface in r.surfaces]


def aten_routes() -> list[tuple[str, str, str]]:
    """(ATen op as torch.export names it, implementation, adapter) from TABLE and ATEN_ONLY:
    the op runs `adapter` (a function of torch_import.py) if named, else the implementation
    (`Tensor.exp`, `functions.cat`, `F.silu`); adapter `skip` records nothing."""
    own = [(op, row.implementation, adapter) for row in ROWS for op, adapter in row.aten]
    only = [(op, "", adapter) for op, adapter in map(str.split, _lines(ATEN_ONLY))]
    return [(f"aten.{op}", implementation, adapter) for op, implementation, adapter in own + only]


CORE_ATEN_KINDS = ("backward", "absent", "todo")


def core_aten_unrouted() -> list[tuple[str, str, str]]:
    """(ATen op as torch.export names it, kind, why) of CORE_ATEN_UNROUTED."""
    return [(f"aten.{op}", kind, why) for op, kind, why in
            (line.split(None, 2) for line in _lines(CORE_ATEN_UNROUTED))]


def _bound_from(row: Row, surface: str) -> str:
    """The module that defines `row.name` for `surface`: its own module when home, its
    adapter module when adapted (torch.X adapters live in adapters.py)."""
    own = {"torch": "functions", "Tensor": "Tensor", "F": "F"}[surface]
    if surface in row.adapted:
        return "adapters" if surface == "torch" else own
    if row.home == own:
        return own
    return "functions" if row.home == "Tensor" else row.home


# ---- writing the blocks -------------------------------------------------------------------------
ROOT = pathlib.Path(__file__).parent
BEGIN = "# ---- generated by `python -m aneforge._api` from its TABLE, do not edit: {} ----"
END = "# ---- end of generated block: {} ----"


def _names(names: list[str], head: str, tail: str) -> str:
    """`head` names `tail` on one line if it fits, else one indented run of lines."""
    if len(head + ", ".join(names) + tail) <= 100:
        if head.endswith("import ("):           # a one-line import needs no parentheses
            head, tail = head[:-1], tail[1:]
        return head + ", ".join(names) + tail
    lines, line = [], "   "
    for n in names:
        if len(line) + len(n) + 2 > 100:
            lines.append(line.rstrip())
            line = "   "
        line += f" {n},"
    return "\n".join([head, *lines, line.rstrip(",") + tail])


class _Written(str):
    """An annotation shown as written: the Tensor modules' are strings (`from __future__ import
    annotations`), which inspect would print quoted."""
    def __repr__(self) -> str:
        return self.replace('"', "").replace("'", "")


def _written(annotation):
    """An annotation as the forwarder's source spells it. A method in a module without
    `from __future__ import annotations` (a mixin of Tensor, say) has evaluated ones, which
    print with their module path (`aneforge.tensor.Tensor`): the path is dropped."""
    if annotation is inspect.Parameter.empty:
        return annotation
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return _Written(re.sub(r"\baneforge(\.\w+)*\.", "", text))


def _forwarder(name: str) -> str:
    """`def name(input, ...)` calling the Tensor method, with the method's own parameters."""
    from .tensor import Tensor
    sig = inspect.signature(getattr(Tensor, name))
    params = [p.replace(annotation=_written(p.annotation)) for p in sig.parameters.values()][1:]
    call = ", ".join({p.VAR_POSITIONAL: f"*{p.name}", p.VAR_KEYWORD: f"**{p.name}",
                      p.KEYWORD_ONLY: f"{p.name}={p.name}"}.get(p.kind, p.name) for p in params)
    tensor = FIRST_ARGUMENT.get(name, "input")
    first = inspect.Parameter(tensor, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=_Written("Tensor"))
    sig = sig.replace(parameters=[first, *params],
                      return_annotation=_written(sig.return_annotation))
    doc = f"torch.{name}: `{tensor}.{name}({call})`; see Tensor.{name}."
    if name in EXAMPLES:
        body = "\n".join(f"    {line}" for line in EXAMPLES[name].splitlines())
        doc += f"\n\n    >>> import aneforge as af\n{body}\n    "
    line = f"def {name}{sig}:"
    if len(line) > 100:                     # wrap the parameters under the opening parenthesis
        cut = line.rindex(", ", 0, 100)
        line = f"{line[:cut + 1]}\n{' ' * (len(name) + 5)}{line[cut + 2:]}"
    return f'{line}\n    """{doc}"""\n    return {tensor}.{name}({call})'


def blocks() -> dict[tuple[str, str], str]:
    """(file, block name) -> the text the table puts there."""
    af_rows = on("torch")
    in_functions = [r.name for r in af_rows if _bound_from(r, "torch") == "functions"]
    from_f = [r.name for r in af_rows if _bound_from(r, "torch") == "F"]
    adapted = [r.name for r in af_rows if _bound_from(r, "torch") == "adapters"]
    f_imports = [r.name for r in on("F") if _bound_from(r, "F") == "functions"]
    forwarders = [r.name for r in af_rows if r.home == "Tensor" and "torch" not in r.adapted]
    return {
        ("forwarders.py", "forwarders"): "\n\n\n".join(_forwarder(n) for n in forwarders),
        ("functions.py", "forwarders"): _names(forwarders, "from .forwarders import (", ")"),
        ("functions.py", "__all__"): _names([f'"{n}"' for n in in_functions], "__all__ = [", "]"),
        ("nn/functional.py", "imports"):
            _names(f_imports, "from ..functions import (", ")") + "\n\n" +
            _names([f'"{r.name}"' for r in on("F")], "__all__ = [", "]"),
        ("__init__.py", "imports"):
            _names(in_functions, "from .functions import (", ")") + "\n" +
            _names(adapted, "from .adapters import (", ")") + "\n" +
            _names(from_f, "from .nn.functional import (", ")"),
        ("__init__.py", "__all__"):
            _names([f'"{r.name}"' for r in af_rows], "__all__ += [", "]"),
    }


def read_block(path: str, name: str) -> str:
    text = (ROOT / path).read_text()
    begin, end = BEGIN.format(name), END.format(name)
    return text[text.index(begin) + len(begin):text.index(end)].strip("\n")


def write_blocks() -> None:
    for (path, name), body in blocks().items():
        file = ROOT / path
        text = file.read_text()
        begin, end = BEGIN.format(name), END.format(name)
        start, stop = text.index(begin) + len(begin), text.index(end)
        file.write_text(f"{text[:start]}\n{body}\n{text[stop:]}")


if __name__ == "__main__":
    write_blocks()
