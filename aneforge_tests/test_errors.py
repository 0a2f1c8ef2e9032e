"""Bad input raises when the op is recorded, naming the op, the shapes and the limit."""
import numpy as np
import pytest

import aneforge as af


def test_broadcast_failure_names_op_and_shapes():
    with pytest.raises(af.ShapeError, match=r"add: shapes do not broadcast.*\[3, 4\].*\[5\]"):
        af.ones(3, 4) + af.ones(5)


def test_matmul_inner_size_mismatch():
    with pytest.raises(af.ShapeError, match=r"matmul: contraction sizes differ: x has 4, y has 5"):
        af.ones(3, 4) @ af.ones(5, 2)


def test_mm_takes_two_matrices_of_matching_sizes_as_torch_does():
    with pytest.raises(af.ShapeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied "
                                            r"\(3x4 and 5x2\)"):
        af.ones(3, 4).mm(af.ones(5, 2))
    with pytest.raises(af.ShapeError, match="mm: both operands must be 2-D.*use matmul"):
        af.mm(af.ones(2, 3, 4), af.ones(4, 5))


def test_reshape_size_mismatch():
    with pytest.raises(af.ShapeError, match="invalid for input of size 12"):
        af.ones(3, 4).reshape(5, -1)


def test_rank_above_five():
    """Rank 6 lives between reshapes (tensor/highrank.py); what needs the rank says so."""
    x = af.ones(1, 1, 1, 1, 1).unsqueeze(0)
    assert x.shape == af.zeros(1, 1, 1, 1, 1, 1).shape == (1,) * 6
    with pytest.raises(af.AneforgeError, match=r"softmax\(\) on a rank-6 tensor.*rank <= 5.*"
                                               r"reshape it to 5 dims or fewer first"):
        x.softmax(-1)


def test_axis_over_65536():
    x = af.ones(40000, 1) * 2                   # computed: a program would have to hold the cat
    with pytest.raises(af.LimitError, match=r"concat: .*axis 0 of size 80000.*1\.\.65536"):
        af.cat([x, x])
    w = af.zeros(65537, requires_grad=True)          # host data: no gradient through programs
    with pytest.raises(af.LimitError, match="past 65536.*needs a gradient.*no_grad"):
        (w * 2).sum()


def test_unsupported_dtypes():
    with pytest.raises(af.DTypeError, match=r"logical_not: input 'x' has dtype fp16.*accepts bool"):
        af.ones(2).logical_not()
    with pytest.raises(af.DTypeError, match=r"need bool tensors.*compare first"):
        af.ones(2) & af.ones(2)
    with pytest.raises(af.DTypeError, match="no aneforge dtype"):
        af.tensor(np.array(["a", "b"]))
    with pytest.raises(af.DTypeError, match="unknown dtype"):
        af.zeros(2, dtype="complex64")
    with pytest.raises(af.AneforgeError, match="condition must be a bool tensor"):
        af.where(af.ones(2), af.ones(2), af.zeros(2))


def test_int_values_outside_int16_cross_the_boundary():
    """They used to raise DTypeError; they cross in two parts (core/boundary.py)."""
    big = af.tensor(np.array([70000], np.int64))
    assert (big + 1).tolist() == [70001]


def test_int_results_outside_int16_cross_the_boundary():
    assert af.arange(300).sum().item() == 44850
    assert (af.full((2,), 100) * 300).tolist() == [30000, 30000]


def test_errors_are_raised_at_record_time_not_at_compile():
    af.clear_cache()
    with pytest.raises(af.ShapeError):
        af.ones(2, 3) * af.ones(4)
    assert af.cache_info().misses == 0


def test_advanced_indexing_says_what_to_do():
    assert af.ones(3)[af.arange(2)].shape == (2,)          # one tensor index: supported
    assert af.ones(3, 3)[af.arange(2), af.arange(2)].shape == (2,)     # several: broadcast
    with pytest.raises(af.AneforgeError, match="nonzero"):
        af.ones(3, 3)[af.tensor([True, False, True]), af.arange(2)]
    x = af.ones(3)
    x[0] = 2.0                                              # assignment: as torch's
    assert x.tolist() == [2.0, 1.0, 1.0]


def test_const_inputs_are_checked_on_every_route():
    """OpDef.apply is the one place an op is checked: recording, a pass's Graph.add and the MIL
    text reader all refuse a conv whose weight is computed (MIL requires a const)."""
    from aneforge.ir import Block, Function, Program, TensorType, Var
    from aneforge.mil.text import MILSyntaxError, parse
    from aneforge.passes.graph import Graph
    from aneforge.tensor import record_op
    x, w = af.ones(1, 2, 4, 4), af.ones(3, 2, 1, 1)
    with pytest.raises(af.AneforgeError, match="conv: input 'weight' must be a constant"):
        record_op("conv", {"x": x, "weight": w + 1}, {})
    vx = Var("x", TensorType((1, 2, 4, 4), af.float16))
    vw = Var("w", TensorType((3, 2, 1, 1), af.float16))
    graph = Graph(Program({"main": Function(Block([vx, vw], [], [vx]))}), None)
    with pytest.raises(af.AneforgeError, match="conv: input 'weight' must be a constant"):
        graph.add("conv", {"x": vx, "weight": vw})
    ones = "const(tensor<int32, [2]>([1, 1]))"
    text = ("program(1.3) {\n"
            "  func main<ios18>(tensor<fp16, [1, 2, 4, 4]> x, tensor<fp16, [3, 2, 1, 1]> w) {\n"
            f"    tensor<fp16, [1, 3, 4, 4]> y = conv(x = x, weight = w, strides = {ones}, "
            f'pad_type = string("valid"), dilations = {ones}, groups = const(int32(1)))'
            '[name = string("y")];\n'
            "  } -> (y);\n}")
    with pytest.raises(MILSyntaxError, match="weight' must be a constant"):
        parse(text)
