"""One root exception, so callers (and the CLI) can catch everything freezestats raises on purpose.

Messages state the invariant, the offending value and where it came from, e.g.
"`train_size` must be > 0, but got train_size=-5 (grid.train_sizes[2])."

Beside them, two warnings about the user's files: :class:`RenamedWarning`, raised by :func:`warn_renamed`
when a spec, a results table or an analysis folder still uses a name that has since been renamed, and
:class:`DataWarning`, about a task's data that is usable but flawed (duplicate texts across splits).
"""

from __future__ import annotations

import warnings

__all__ = [
    "DataError",
    "DataWarning",
    "FreezestatsError",
    "ModelError",
    "ModelFitError",
    "RenamedWarning",
    "ReportError",
    "SpecError",
    "StorageError",
    "TrialFailed",
    "warn_renamed",
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


class RenamedWarning(FutureWarning):
    """A spec key, a results column or an analysis table under the name it had before it was renamed.

    The old name is still read, meaning what it meant; the message names the new one to write. A
    ``FutureWarning`` rather than a ``DeprecationWarning`` because it is about the user's files, not their
    code, so Python shows it by default; the command line prints it as one line.
    """


class DataWarning(UserWarning):
    """A task's data is usable but flawed in a way that biases results (e.g. validation texts that are in train).

    Not an error: the study can run, and the user decides; the command line prints it as one line.
    """


def warn_renamed(kind: str, old: str, new: str, where: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` (a ``kind``, e.g. "spec key") is now called ``new``; ``where`` names the file or folder.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_renamed("spec key", "model.strategy", "model.freezing", "my.toml")
    >>> print(caught[0].message)
    deprecated spec key `model.strategy`: now `model.freezing` (my.toml), read as before
    """
    warnings.warn(
        f"deprecated {kind} `{old}`: now `{new}` ({where}), read as before",
        RenamedWarning,
        stacklevel=stacklevel,
    )
