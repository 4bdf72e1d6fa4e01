"""The evaluation pool: labelled items of the task, reserved from train before any subset is drawn.

Every run is scored once on the pool, at the checkpoint chosen on the validation set. The pool never trains:
it is taken out of train first, and the nested subsets draw from what is left. Two rules decide what is left:

* **SST-2.** Its train rows are phrases cut from the parse trees of 6,885 whole sentences (the rows no other row
  contains). The pool is a stratified sample of those sentences, and a train row stays trainable only if it is a
  span (a run of whole tokens) of a sentence outside the pool, so no trainable row equals or contains a pool
  sentence. The population the pool speaks of: SST-2 sentences outside training.
* **Every other task.** A stratified sample of train rows (fixed seed), and every train row whose text equals a
  pool item's is dropped from train too. The population: the task's train distribution, outside training.
* **A user's pool file** (``pool = "pool.csv"`` beside ``train``): a stratified sample of its rows; train is left
  whole, since reading the file refused any pool text that is a train text.

The pool's draw is fixed by the data alone (seed 0): every process, resume and worker reserves the same pool, and
its identity (:meth:`EvaluationPool.identity`, a hash of its texts and labels) is stored with each run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from freezestats.exceptions import SpecError
from freezestats.tasks.subsets import nested_order, stratification_labels
from freezestats.tasks.taskdata import TaskData

__all__ = ["EvaluationPool", "reserve_pool", "sentence_rows", "spans_of"]

POOL_SEED = 0


@dataclass(frozen=True)
class EvaluationPool:
    """The pool's items (the task's text columns and ``label``) and which population they speak for."""

    items: pd.DataFrame
    population: str

    def __len__(self) -> int:
        return len(self.items)

    @property
    def labels(self) -> np.ndarray:
        return self.items["label"].to_numpy()

    def identity(self, text_columns: tuple[str, ...] | list[str]) -> str:
        """sha256 of the items' texts and labels, in order: a resume must score the same pool."""
        digest = hashlib.sha256()
        for row in self.items[[*text_columns, "label"]].itertuples(index=False):
            digest.update(repr(tuple(row)).encode())
        return digest.hexdigest()[:16]


def _normal(text: str) -> str:
    return " ".join(str(text).split())


def sentence_rows(texts: pd.Series) -> np.ndarray:
    """Positions of the rows that no other row contains as a span of whole tokens (one per distinct text).

    Longest first: a row is a sentence if it is not a span of a longer sentence already found. Each sentence's
    proper spans go into one set, so the check is a set lookup (SST-2: 1.5 M spans, a few seconds)."""
    normal = [_normal(t) for t in texts]
    order = sorted(range(len(normal)), key=lambda i: (-len(normal[i].split()), i))
    spans: set[str] = set()
    seen: set[str] = set()
    sentences = []
    for i in order:
        text = normal[i]
        if text in spans or text in seen:
            continue
        seen.add(text)
        sentences.append(i)
        spans |= spans_of(text, proper=True)
    return np.sort(np.asarray(sentences, dtype=np.int64))


def spans_of(text: str, proper: bool = False) -> set[str]:
    """Every run of whole tokens of ``text`` (``proper``: all but the whole text)."""
    tokens = _normal(text).split()
    n = len(tokens)
    return {" ".join(tokens[a:b]) for a in range(n) for b in range(a + 1, n + 1) if not (proper and b - a == n)}


def reserve_pool(data: TaskData, size: int) -> tuple[TaskData, EvaluationPool]:
    """``data`` with train cut to the rows that may train, and the pool of ``size`` items reserved from it."""
    task = data.task
    if data.pool is not None:  # the user's pool file: never in train, checked when it was read
        what = f"rows of task '{task.name}''s pool file"
        chosen = _stratified(data.pool["label"].to_numpy(), size, task.is_regression, what)
        return data, EvaluationPool(data.pool.iloc[chosen].reset_index(drop=True), f"{task.name} pool file")
    if task.name == "sst2" and data.origin is None:
        keep, pool_rows = _sst2_split(data.train, size)
        population = "SST-2 sentences outside training"
    else:
        keep, pool_rows = _rows_split(data, size)
        population = f"{task.name} items drawn like its train set, outside training"
    pool = EvaluationPool(data.train.iloc[pool_rows].reset_index(drop=True), population)
    train = data.train.iloc[keep].reset_index(drop=True)
    origin = data.origin if data.origin is None else replace(data.origin, train_ids=data.origin.train_ids[keep])
    return replace(data, train=train, origin=origin), pool


def _stratified(labels: np.ndarray, size: int, regression: bool, what: str) -> np.ndarray:
    if size > len(labels):
        raise SpecError(f"`evaluation.pool = {size}` asks for more items than the {len(labels)} {what} there are.")
    strata = stratification_labels(labels, regression=regression)
    return np.sort(nested_order(strata, POOL_SEED)[:size])


def _sst2_split(train: pd.DataFrame, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(trainable rows, pool rows): the pool is ``size`` whole sentences; trainable rows are spans of the others."""
    sentences = sentence_rows(train["sentence"])
    chosen = sentences[_stratified(train["label"].to_numpy()[sentences], size, False, "SST-2 sentences")]
    others = np.setdiff1d(sentences, chosen)
    allowed: set[str] = set()
    for i in others:
        allowed |= spans_of(train["sentence"].iloc[i])
    normal = np.array([_normal(t) in allowed for t in train["sentence"]])
    return np.flatnonzero(normal), chosen


def _rows_split(data: TaskData, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(trainable rows, pool rows): a stratified sample of rows, and train less every row sharing a pool text."""
    task = data.task
    chosen = _stratified(data.train_labels, size, task.is_regression, f"{task.name} train rows")
    texts = data.train[list(task.text_columns)].astype(str).agg(" || ".join, axis=1).map(_normal)
    pooled = set(texts.iloc[chosen])
    keep = np.flatnonzero(~texts.isin(pooled).to_numpy())
    return keep, chosen
