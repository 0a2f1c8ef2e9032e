"""torch.backends.cudnn on a machine without cuDNN: `is_available()` is False and the flags
scripts set are accepted, read back and have no effect here (aneforge compiles each program once
per shape signature and always runs it the same way: `benchmark` and `deterministic` have
nothing to choose between). torch's defaults.

>>> import aneforge.backends.cudnn as cudnn
>>> cudnn.benchmark = True
>>> cudnn.benchmark, cudnn.is_available()
(True, False)
"""

benchmark = False
deterministic = False
enabled = True
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """False: no cuDNN here."""
    return False


def version():
    """None, as torch's without cuDNN."""
    return None
