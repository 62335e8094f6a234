"""Model adapters. `FunctionModel` wraps a Python callable (the toy world)."""

from .base import DecodeSession, LanguageModel
from .function import FeatureFunctionModel, FeatureReadingDraft, FunctionModel

__all__ = ["DecodeSession", "FeatureFunctionModel", "FeatureReadingDraft", "FunctionModel", "LanguageModel"]
