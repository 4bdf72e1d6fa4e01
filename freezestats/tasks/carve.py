"""A validation set carved from train, when a user's task gives none: stratified, with a fixed seed.

Without a validation split nothing can pick a checkpoint or score a run, so part of train is set aside once.
It is stratified (by class, or by quantile bins of a regression target, as the train subsets are), so a rare
class is not left out of it by chance, and it is drawn with a fixed seed, so the same data gives the same
carve. The study stores the carved rows and a resume, or a worker on another machine, reads them back rather
than carving again (:func:`freezestats.tasks.data.load_task_data`'s ``carve``): a different library version can
then never change which rows the runs were scored on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from freezestats.exceptions import DataError
from freezestats.tasks.subsets import stratification_labels

__all__ = ["carve_validation"]


def carve_validation(
    labels: np.ndarray, regression: bool, fraction: float, seed: int, names: Sequence[str] | None = None
) -> np.ndarray:
    """Sorted positions (from 0) of the train rows that become the validation set.

    ``sklearn.model_selection.train_test_split(..., test_size=fraction, stratify=strata, random_state=seed)`` on
    the row positions. ``names`` (class names by code) only make the messages readable.

    Raises
    ------
    DataError
        A class with fewer than 2 rows (it cannot be on both sides), or a carve smaller than the number of strata.

    Examples
    --------
    >>> carve_validation(np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1]), False, 0.2, seed=0).tolist()
    [0, 7]
    """
    from sklearn.model_selection import train_test_split

    strata = stratification_labels(labels, regression=regression)
    n = len(strata)
    size = math.ceil(fraction * n)
    values, counts = np.unique(strata, return_counts=True)
    if not regression and counts.min() < 2:
        rare = values[counts < 2]
        shown = [names[int(k)] if names is not None else str(k) for k in rare[:5]]
        raise DataError(
            f"A validation set cannot be carved from train stratified by class: class(es) {shown} have 1 row; "
            "give a validation file, or more rows of those classes."
        )
    if size < len(values) or n - size < len(values):
        raise DataError(
            f"A validation set cannot be carved from train: validation_fraction={fraction} of {n} rows gives "
            f"{size} validation rows for {len(values)} {'bins' if regression else 'classes'}; give a validation "
            "file or a larger validation_fraction."
        )
    _, carved = train_test_split(np.arange(n), test_size=size, random_state=seed, stratify=strata)
    return np.sort(carved).astype(np.int64)
