"""The errors aneforge raises. Each message says what was asked, the limit, and what to do."""
import pickle


class AneforgeError(Exception):
    """Base class of every aneforge error."""


class ShapeError(AneforgeError, ValueError):
    """Shapes that do not fit an op (broadcasting, matmul inner sizes, reshape sizes, ...)."""


class LimitError(AneforgeError, ValueError):
    """A shape the ANE cannot hold: rank > 5, an axis < 1 or > 65536, ..."""


class DTypeError(AneforgeError, TypeError):
    """A dtype an op or the program boundary does not accept."""


class CompileWallError(AneforgeError):
    """A graph the ANE compiler is known to reject (see aneforge/ops/walls.py for each wall and its public source)."""


class BackendUnavailable(AneforgeError, RuntimeError):
    """The chosen backend cannot run on this machine."""


class OutOfMemoryError(AneforgeError, MemoryError):
    """A program whose simulation needs more host memory than the budget (checked before any
    allocation; the budget is ANEFORGE_SIM_MAX_BYTES, else 90% of available memory)."""


class CheckpointError(AneforgeError, ValueError, pickle.UnpicklingError):
    """A checkpoint `af.load` refuses: damaged (a record absent, shorter or longer than its
    tensor needs, a view past its storage, a pickle that does not parse), naming code, or
    holding values float16 cannot hold under `strict_range=True`. Also a `ValueError` and a
    `pickle.UnpicklingError`, what `torch.load` raises for a file it refuses."""


class Float16RangeWarning(UserWarning):
    """Values from outside (a checkpoint, a state_dict, host data, a Python number) that change
    beyond rounding when stored as float16: finite values past 65504 become +-inf, nonzero values
    below 2**-25 become 0. `warnings.simplefilter("error", aneforge.Float16RangeWarning)` makes
    it an error."""


class ANEHazardWarning(UserWarning):
    """A value hit a hardware cliff the ANE would hit too: a matmul output past 32752 read back
    as inf, a width-slice gain overflow, a NaN coerced to +inf. The simulator reports it naming
    the op; `warnings.simplefilter("error", aneforge.ANEHazardWarning)` makes it an error."""


class HostSegmentNotice(UserWarning):
    """An op left the ANE for the host (numpy): its output shape depends on the data (nonzero,
    masked_select, unique, a bool-mask index) or the engine has no route for it. Said once per
    op; on hardware each such op costs a round trip (the ANE segment before it finishes, the
    host computes, the next segment starts). `af.explain(fn, *args)` lists every segment;
    `warnings.simplefilter("ignore", aneforge.HostSegmentNotice)` silences it."""
