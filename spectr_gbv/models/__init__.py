"""Model adapters. `FunctionModel` wraps a Python callable (the toy world)."""

from .base import DecodeSession, LanguageModel
from .function import FunctionModel

__all__ = ["DecodeSession", "FunctionModel", "LanguageModel"]
