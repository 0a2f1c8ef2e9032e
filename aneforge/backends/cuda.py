"""torch.backends.cuda on a machine without CUDA: `matmul.allow_tf32` and the other flags are
accepted, read back and have no effect here (programs run in fp16 on the Neural Engine).

>>> import aneforge.backends.cuda
>>> aneforge.backends.cuda.matmul.allow_tf32 = True
>>> aneforge.backends.cuda.matmul.allow_tf32, aneforge.backends.cuda.is_built()
(True, False)
"""
import types

matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                               allow_bf16_reduced_precision_reduction=True)


def is_built() -> bool:
    """False: no CUDA here."""
    return False


def is_available() -> bool:
    """False: no CUDA here (what `af.cuda.is_available()` says)."""
    return False
