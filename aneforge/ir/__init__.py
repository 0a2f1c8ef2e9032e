"""The IR: MIL-shaped SSA (see program.py)."""
from .program import Block, Function, Operation, Program, Var
from .types import TensorType
from .validate import ValidationError, validate

__all__ = ["Block", "Function", "Operation", "Program", "Var", "TensorType", "validate",
           "ValidationError"]
