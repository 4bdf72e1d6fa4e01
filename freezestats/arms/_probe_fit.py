"""Fit and score one probe cell: cross-validated L2 logistic (or ridge) regression on cached frozen features.

Apart from :mod:`freezestats.arms._probe` (the arm) and :mod:`freezestats.arms._probe_features` (the feature cache)
because this half is pure
scikit-learn and numpy on arrays: what it returns is the :class:`~freezestats.training.RunOutcome` every
arm returns, with a one-point learning curve (see that module for how the three metrics map onto it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from freezestats.arms._probe_features import encoder, features

if TYPE_CHECKING:
    from freezestats.tasks import TaskConfig
    from freezestats.training._encoding import EncodedSplit
    from freezestats.training._outcome import RunOutcome

C_GRID = tuple(float(c) for c in np.logspace(-4, 2, 7))
"""The inverse regularisation strengths cross-validated (the ridge's ``alpha`` runs over their inverses)."""

__all__ = ["fit_probe"]

_ABSENT_LOGIT = -1e4
"""The log-probability given to a class the training subset lacks (the probe cannot predict it)."""


def fit_probe(
    pooling: str,
    level: int,
    *,
    model_name: str,
    task: TaskConfig,
    metric: str,
    train: EncodedSplit,
    validation: EncodedSplit,
    select_idx: np.ndarray,
    score_idx: np.ndarray,
    training: Any,
    tokenizer: Any,
    on_step: Callable[[int, int], None] | None = None,
    **_unused: Any,
) -> RunOutcome:
    """The probe of layer ``level`` fitted on ``train`` and scored on ``validation``; the loop's other inputs
    (seed, learning rate, prefix cache) do not apply and are ignored."""
    from freezestats.tasks.curve import summarize_curve
    from freezestats.tasks.metrics import compute_metrics
    from freezestats.training import resolve_device
    from freezestats.training._measure import Meter
    from freezestats.training._outcome import RunOutcome
    from freezestats.training.predictions import Checkpoint

    meter = Meter()
    device = resolve_device(training.device)
    meter.watch(device)
    batch = training.eval_batch_size
    x_train, train_cached = features(model_name, train, tokenizer, pooling, batch, device)
    x_dev, dev_cached = features(model_name, validation, tokenizer, pooling, batch, device)
    x_train, x_dev = x_train[:, level, :], x_dev[:, level, :]
    fit = _fit(x_train, train.labels, task, metric)
    predictions, logits = _predict(fit.model, x_dev, task)
    labels = validation.labels
    point = _point(task, metric, predictions, labels, select_idx, score_idx)
    point.update(train_loss=fit.train_loss, C=fit.c, folds=fit.folds)
    summary = summarize_curve([point["full"]], [point["select"]], [point["score"]])
    meter.trainable = fit.n_params
    meter.total = fit.n_params + sum(p.numel() for p in _encoder_parameters(model_name, device))
    measured = meter.read(device)
    if on_step is not None:
        on_step(1, 1)
    checkpoint = Checkpoint(0, predictions, logits)
    return RunOutcome(
        summary=summary,
        curve=[point],
        final_metrics=compute_metrics(task.metrics, predictions, labels),
        trainable_params=measured.trainable_params,
        total_params=measured.total_params,
        n_steps=0,
        wall_seconds=measured.wall_seconds,
        peak_mem_bytes=measured.peak_mem_bytes,
        peak_mem_kind=measured.peak_mem_kind,
        device=measured.device,
        precision="fp32",
        final_train_loss=fit.train_loss,
        checkpoints={"best": checkpoint, "heldout": checkpoint, "final": checkpoint},
        extra={"eval_prefix_cached": dev_cached, "train_prefix_cached": train_cached, "probe_c": fit.c},
    )


@dataclass(frozen=True)
class _Fit:
    """The fitted pipeline, the chosen C (``None``: not cross-validated), folds, parameters and train loss."""

    model: Any
    c: float | None
    folds: int
    n_params: int
    train_loss: float


def _fit(x: np.ndarray, y: np.ndarray, task: TaskConfig, metric: str) -> _Fit:
    """Standardise, then cross-validate C on the training subset only and refit on all of it."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if task.is_regression:
        pipeline = make_pipeline(StandardScaler(), Ridge())
        grid = {"ridge__alpha": [1.0 / c for c in C_GRID]}
        folds = min(5, len(y))
        cv = KFold(folds, shuffle=True, random_state=0)
    else:
        pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        grid = {"logisticregression__C": list(C_GRID)}
        _, counts = np.unique(y, return_counts=True)
        folds = min(5, int(counts.min())) if len(counts) > 1 else 0
        cv = StratifiedKFold(folds, shuffle=True, random_state=0) if folds >= 2 else None
    if len(np.unique(y)) < 2 or cv is None or folds < 2:  # nothing to cross-validate: one class, or too few
        model, c = _constant_or_default(pipeline, x, y, task), None
    else:
        search = GridSearchCV(pipeline, grid, cv=cv, scoring=_scorer(metric), error_score=np.nan)
        model = search.fit(x, y).best_estimator_
        chosen = next(iter(search.best_params_.values()))
        c = 1.0 / chosen if task.is_regression else chosen
    return _Fit(model, c, folds, _n_params(model), _train_loss(model, x, y, task))


def _constant_or_default(pipeline: Any, x: np.ndarray, y: np.ndarray, task: TaskConfig) -> Any:
    """A subset with one class gets a constant predictor; one too small for folds the default C = 1."""
    from sklearn.dummy import DummyClassifier

    if not task.is_regression and len(np.unique(y)) < 2:
        return DummyClassifier(strategy="most_frequent").fit(x, y)
    return pipeline.fit(x, y)


def _scorer(metric: str) -> Callable[[Any, np.ndarray, np.ndarray], float]:
    """Score a fold on the task's primary metric (an undefined value, e.g. MCC of a constant fold, is 0)."""
    from freezestats.tasks.metrics import compute_metrics

    def score(estimator: Any, x: np.ndarray, y: np.ndarray) -> float:
        value = compute_metrics([metric], estimator.predict(x), y)[metric]
        return float(value) if np.isfinite(value) else 0.0

    return score


def _predict(model: Any, x: np.ndarray, task: TaskConfig) -> tuple[np.ndarray, np.ndarray]:
    """Predictions and logits (log-probabilities, one column per task label) in the split's order."""
    if task.is_regression:
        values = np.asarray(model.predict(x), dtype=np.float64)
        return values, values[:, None].astype(np.float32)
    logits = np.full((len(x), task.num_labels), _ABSENT_LOGIT, dtype=np.float32)
    with np.errstate(divide="ignore"):
        log_proba = np.log(model.predict_proba(x))
    logits[:, np.asarray(model.classes_, dtype=int)] = np.maximum(log_proba, _ABSENT_LOGIT)
    return logits.argmax(axis=1).astype(np.int64), logits


def _point(
    task: TaskConfig,
    metric: str,
    predictions: np.ndarray,
    labels: np.ndarray,
    select_idx: np.ndarray,
    score_idx: np.ndarray,
) -> dict[str, Any]:
    """The curve's one point, shaped like the evaluator's: every metric on the whole set, the primary on the halves."""
    from freezestats.tasks.metrics import compute_metrics

    metrics = compute_metrics(task.metrics, predictions, labels)
    return {
        "step": 0,
        "epoch": 0.0,
        "metrics": metrics,
        "full": metrics[metric],
        "select": compute_metrics([metric], predictions[select_idx], labels[select_idx])[metric],
        "score": compute_metrics([metric], predictions[score_idx], labels[score_idx])[metric],
    }


def _n_params(model: Any) -> int:
    """Coefficients and intercepts of the fitted linear model (0 for a constant predictor)."""
    last = model.steps[-1][1] if hasattr(model, "steps") else model
    if not hasattr(last, "coef_"):
        return 0
    return int(np.size(last.coef_) + np.size(last.intercept_))


def _train_loss(model: Any, x: np.ndarray, y: np.ndarray, task: TaskConfig) -> float:
    """Log-loss (classification) or mean squared error (regression) of the fitted probe on its training subset."""
    from sklearn.metrics import log_loss, mean_squared_error

    if task.is_regression:
        return float(mean_squared_error(y, model.predict(x)))
    return float(log_loss(y, model.predict_proba(x), labels=model.classes_)) if len(model.classes_) > 1 else 0.0


def _encoder_parameters(model_name: str, device: Any) -> Any:
    return encoder(model_name, device).parameters()
