"""`.mlpackage` export (aneforge/mil/package.py), checked by coremltools on Linux: the package
loads with skip_model_load, its program converts back to pymil, and the model interface
describes every input and output by name, shape and dtype."""
from __future__ import annotations

import numpy as np
import pytest

import aneforge as af
from optable import CASES
from test_coreml_accepts import forward

IOS18 = 9


def training_step_program():
    """The one program of an nn.Linear + AdamW training step (parameters and state as I/O)."""
    import aneforge.nn as nn
    import aneforge.nn.functional as F
    from aneforge import compiler
    model = nn.Linear(8, 4)
    opt = af.optim.AdamW(model.parameters(), lr=1e-3)
    captured, real = [], compiler.realize

    def spy(refs, include_wanted=False):
        if include_wanted:
            captured.append(compiler.Cut([r for r in refs if r[0].data is None]).program())
        return real(refs, include_wanted)
    compiler.realize = spy
    try:
        loss = F.mse_loss(model(af.randn(5, 8)), af.randn(5, 4))
        loss.backward()
        opt.step()
    finally:
        compiler.realize = real
    (program,) = captured
    return program
