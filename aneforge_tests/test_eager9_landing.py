"""A realization's host side around the run: the inputs handed to the program (a stored fp16
leaf as its own array, other forms through `boundary.encode`), the int16 check of int32 inputs,
and the landing of each output on its node (`realization._land`: a node's outputs are one run
of the results)."""
import numpy as np
import pytest

import aneforge as af
from aneforge import dtypes
from aneforge.core import boundary, realization
from aneforge.core.realization import recording
from aneforge.ir import TensorType


def test_a_multi_output_node_lands_each_output_in_its_place_in_one_program():
    """split's two outputs, read with single-output values on either side of them in the same
    program: each lands where it belongs."""
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = af.tensor(data)
    before = x * 2.0
    a, b, c = (x + 1.0).split([1, 2, 3], dim=1)
    after = x - 3.0
    with recording() as runs:
        realization.realize([before.ref, a.ref, after.ref])
    assert len(runs) == 1
    got = [t.numpy() for t in (before, a, b, c, after)]   # b, c: computed with a, no run
    assert len(runs) == 1
    want = [data * 2, data[:, :1] + 1, data[:, 1:3] + 1, data[:, 3:] + 1, data - 3]
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float16))


def test_inputs_hand_a_stored_fp16_leaf_itself_and_encode_every_other_form():
    """The array of an fp16 leaf of the boundary's shape goes in as it is; a scalar crosses as
    shape (1,), float32 as fp16 and int32 in the form `wide` names (`boundary.encode`)."""
    half = af.tensor(np.ones((2, 3), np.float16))
    scalar = af.tensor(np.float16(2.5))
    single = af.tensor(np.ones(3, np.float32), dtype=af.float32)
    ids = af.tensor(np.array([1, 40000, -7]))
    leaves = [t.ref for t in (half, scalar, single, ids)]
    inputs = realization._inputs(leaves, (3,))
    assert inputs[0] is half.ref[0].data[0]
    for (node, i), got, wide in zip(leaves[1:], inputs[1:], (False, False, True)):
        want = boundary.encode(node.data[i], node.types[i], wide)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert inputs[1].shape == (1,) and inputs[2].dtype == np.float16
    assert inputs[3].dtype == np.uint16 and inputs[3].shape == (2, 3)


@pytest.mark.parametrize("values, fits", [([0, 32767, -32768], True), ([32768], False),
                                          ([-32769, 5], False), ([], True)])
def test_int32_inputs_cross_as_int16_exactly_when_every_value_fits(values, fits):
    array = np.array(values, np.int32)
    assert boundary.fits_int16(array) is fits
    if values:
        t = af.tensor(array)
        assert boundary.wide_leaves([t.ref]) == (() if fits else (0,))
        np.testing.assert_array_equal((t + 0).numpy(), array)
        assert TensorType(t.shape, dtypes.int32) == t.ref[0].types[0]
