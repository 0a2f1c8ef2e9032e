"""torch.nn-compatible pieces. `aneforge.nn.functional` (also `F`) holds the stateless functions."""
from . import functional
from . import functional as F  # noqa: N812  (torch's spelling)

__all__ = ["functional", "F"]
