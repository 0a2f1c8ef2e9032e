"""torch.utils's counterparts: `aneforge.utils.data` (datasets, samplers, DataLoader) and
`aneforge.utils.tensorboard` (SummaryWriter; imported as torch's is, by its own name)."""
from . import data

__all__ = ["data"]
