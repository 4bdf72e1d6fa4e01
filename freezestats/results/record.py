"""The record of one trial: the columns ``freezestats export`` writes, and what the runner stores to fill them.

Before this type the runner's record dict, the export's column list and the docs' column table had to
agree by hand. Now :class:`TrialRecord` is the one definition: its exported fields, in declaration order,
*are* the export's columns (:data:`EXPORT_COLUMNS`, which :data:`freezestats.results.export.RESULT_COLUMNS` is),
the runner builds one per finished cell and stores :meth:`TrialRecord.attrs`, and a test holds docs/reference.md
table to the same list. The column order is a contract with the statistics: add fields, never reorder.

Each field says where its value comes from (``source``):

* ``run``: written by the runner when the cell's run finishes (the trial's user attributes);
* ``trial``: read from the trial itself (study name, number, state, role and cell parameters) or written
  by the storage layer (``fail_reason`` on a failed attempt, ``reused_from_trial`` on a copied run). The
  runner leaves these ``None`` and does not store them.

and whether it is an export column (``export``); the others stay with the trial (the learning curve, the
library versions, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["EXPORT_COLUMNS", "GroupTrialRecord", "TrialRecord"]

RUN = "run"
TRIAL = "trial"

_RUN_COLUMN = {"source": RUN, "export": True}
_TRIAL_COLUMN = {"source": TRIAL, "export": True}  # the runner never sets these: they default to None
_KEPT = {"source": RUN, "export": False}  # stored with the trial by the runner, but not an export column


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """One finished trial: its results-table row (``export`` fields, in column order) and what else it keeps.

    The "What every trial records" table of docs/reference.md describes every exported field.
    """

    study: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    trial: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    state: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    role: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    task: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    model: str = field(metadata=_RUN_COLUMN)
    # the freezing rule (`freezing`; `strategy` before it was renamed); None for arms other than freeze
    freezing: str | None = field(metadata=_RUN_COLUMN)
    n_layers: int = field(metadata=_RUN_COLUMN)
    frozen_layers: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    train_size: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    subset_draw: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    seed: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    learning_rate: float | None = field(default=None, metadata=_TRIAL_COLUMN)
    lr_search: str = field(metadata=_RUN_COLUMN)
    frozen_dropout: str = field(metadata=_RUN_COLUMN)
    metric: str = field(metadata=_RUN_COLUMN)
    best_dev: float = field(metadata=_RUN_COLUMN)
    final_dev: float = field(metadata=_RUN_COLUMN)
    heldout: float = field(metadata=_RUN_COLUMN)
    best_step: int = field(metadata=_RUN_COLUMN)
    heldout_step: int = field(metadata=_RUN_COLUMN)
    majority_baseline: float = field(metadata=_RUN_COLUMN)
    failed: bool = field(metadata=_RUN_COLUMN)
    n_eval: int = field(metadata=_RUN_COLUMN)
    n_correct: int | None = field(metadata=_RUN_COLUMN)
    trainable_params: int = field(metadata=_RUN_COLUMN)
    total_params: int = field(metadata=_RUN_COLUMN)
    n_steps: int = field(metadata=_RUN_COLUMN)
    wall_seconds: float = field(metadata=_RUN_COLUMN)
    peak_mem_bytes: int = field(metadata=_RUN_COLUMN)
    device: str = field(metadata=_RUN_COLUMN)
    precision: str = field(metadata=_RUN_COLUMN)
    fail_reason: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    reused_from_trial: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    predictions_artifact: str = field(metadata=_RUN_COLUMN)
    n_correct_best: int | None = field(metadata=_RUN_COLUMN)
    n_correct_heldout: int | None = field(metadata=_RUN_COLUMN)
    n_eval_heldout: int = field(metadata=_RUN_COLUMN)
    top_class_share_best: float | None = field(metadata=_RUN_COLUMN)
    top_class_share_heldout: float | None = field(metadata=_RUN_COLUMN)
    top_class_share_final: float | None = field(metadata=_RUN_COLUMN)
    # the data order's seed: `seed` itself unless the grid crosses order seeds
    order_seed: int = field(metadata=_RUN_COLUMN)
    # the task group the task was trained in, or the task itself when it was trained alone
    trained_with: str = field(metadata=_RUN_COLUMN)
    # how the trial's sentence-pair tasks read their two sentences: "cross" (one joint input) or "bi"
    pair_encoding: str = field(metadata=_RUN_COLUMN)
    # the arm variant and its level (a single-arm study: "freeze" and frozen_layers, filled in by the export)
    arm: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    arm_level: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    # how the run was trained (`run --fuse`, stored on the trial by the fused worker): the worker's setting, how
    # many runs it claimed together, and "fused" or "alone: <why>"; runs without it: "off", 1, "unfused"
    fuse: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    fuse_k: int | None = field(default=None, metadata=_TRIAL_COLUMN)
    fusion: str | None = field(default=None, metadata=_TRIAL_COLUMN)
    # the evaluation pool ([evaluation]): the primary metric on it at the checkpoint chosen on the select half, and
    # its size; None without a pool
    pool_score: float | None = field(default=None, metadata=_RUN_COLUMN)
    n_pool: int | None = field(default=None, metadata=_RUN_COLUMN)
    pool_artifact: str | None = field(default=None, metadata=_RUN_COLUMN)  # its per-item predictions (an artifact)

    # best score on the select half: what lr_search.select_metric = "select" uses
    select_best: float = field(metadata=_KEPT)
    # every task metric at the last step (exported as final_<metric> columns)
    final_metrics: dict[str, float] = field(metadata=_KEPT)
    curve: list[dict[str, Any]] = field(metadata=_KEPT)  # the learning curve, one point per evaluation
    lr_search_reuse: bool = field(metadata=_KEPT)
    eval_prefix_cached: bool = field(metadata=_KEPT)
    train_prefix_cached: bool = field(metadata=_KEPT)
    final_train_loss: float = field(metadata=_KEPT)
    peak_mem_kind: str = field(metadata=_KEPT)  # what peak_mem_bytes measured: cuda_max_allocated or process_max_rss
    versions: dict[str, str] = field(metadata=_KEPT)  # library versions that ran the trial
    arm_kind: str | None = field(default=None, metadata=_KEPT)  # the registered arm behind `arm` (None: single-arm)
    arm_options: dict[str, Any] = field(default_factory=dict, metadata=_KEPT)  # the arm's options (e.g. pooling)
    # torch's intra-op threads when the run ended: more than it started with where a pool's idle worker handed
    # its threads over (freezestats.runner._threads), which its wall_seconds then reflect
    torch_threads: int | None = field(default=None, metadata=_KEPT)
    pool_identity: str | None = field(default=None, metadata=_KEPT)  # hash of the pool's texts and labels

    def attrs(self) -> dict[str, Any]:
        """What the runner stores as the trial's user attributes: every ``run`` field."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata["source"] == RUN}


@dataclass(frozen=True)
class GroupTrialRecord:
    """One finished trial of a task group: one :class:`TrialRecord` per task, exported as one row each.

    The trial stores them under ``group_records`` (task -> that record's :meth:`TrialRecord.attrs`), so
    that one Optuna trial, one run of the shared encoder, gives the export a row per (trial, task).
    """

    group: str
    records: dict[str, TrialRecord]

    @property
    def best_dev(self) -> float:
        """The trial's Optuna value: the mean of the tasks' ``best_dev`` (shown in dashboards, never analysed:
        it averages different metrics)."""
        return sum(record.best_dev for record in self.records.values()) / len(self.records)

    def attrs(self) -> dict[str, Any]:
        return {
            "trained_with": self.group,
            "group_records": {task: record.attrs() for task, record in self.records.items()},
        }


EXPORT_COLUMNS: list[str] = [f.name for f in fields(TrialRecord) if f.metadata["export"]]
"""The export's columns, in order (``final_<metric>`` columns follow them)."""
