"""One root exception, so callers (and the CLI) can catch everything freezestats raises on purpose.

Messages state the invariant, the offending value and where it came from, e.g.
"`train_size` must be > 0, but got train_size=-5 (grid.train_sizes[2])."
"""

from __future__ import annotations

__all__ = [
    "DataError",
    "FreezestatsError",
    "ModelError",
    "ModelFitError",
    "ReportError",
    "SpecError",
    "StorageError",
    "TrialFailed",
]


class FreezestatsError(Exception):
    """Base class of every error freezestats raises deliberately."""


class SpecError(FreezestatsError):
    """A study spec (or a command-line option that overrides one) is invalid."""


class DataError(FreezestatsError):
    """A task's data cannot be found, read, or does not have the expected shape."""


class ModelError(FreezestatsError):
    """A model cannot be loaded, or its architecture is not one freezestats knows how to freeze."""


class StorageError(FreezestatsError):
    """The study database cannot be opened, or holds something inconsistent with the request."""


class TrialFailed(FreezestatsError):
    """A single fine-tuning run failed (NaN loss, out of memory, ...); the study goes on."""


class ModelFitError(FreezestatsError):
    """A statistical model could not be fitted to a results table."""


class ReportError(FreezestatsError):
    """A report cannot be built: unusable input, an output folder in the way, or a renderer that failed."""
