"""Simulated results tables with known effects, for checking that the statistics recover the truth.

:func:`simulate_results` returns a table with the runner's columns (:data:`freezestats.results.export.RESULT_COLUMNS`)
whose responses follow the random-intercept model that :func:`freezestats.stats.fit_mixed` fits, with a cell-mean
table you choose (or the published blog means); :func:`true_cell_means` returns that table, so a test can compare
estimates with the truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from freezestats.results.export import RESULT_COLUMNS
from freezestats.tasks.bundled import bundled_path

__all__ = ["blog_run_sds", "simulate_results", "true_cell_means"]

BLOG_FROZEN_LEVELS: tuple[int, ...] = (-1, 0, 2, 4, 8, 10, 12)
BLOG_TRAIN_SIZES: tuple[int, ...] = (50, 100, 200, 500, 1000)

# Share of the majority class in the GLUE validation split: SST-2 444/872, CoLA 721/1043. The blog's
# collapsed runs score exactly these values (0.509, 0.691).
_MAJORITY_BASELINE = {"sst2": 444 / 872, "cola": 721 / 1043}

Effects = float | Mapping[tuple[int, int], float] | pd.DataFrame | None


@cache
def _blog_means() -> pd.DataFrame:
    return pd.read_csv(bundled_path("data/reference/blog2020_roberta_base.csv"))


def true_cell_means(
    effects: Effects = None,
    *,
    tasks: Sequence[str] = ("sst2",),
    frozen_levels: Sequence[int] = BLOG_FROZEN_LEVELS,
    train_sizes: Sequence[int] = BLOG_TRAIN_SIZES,
) -> pd.DataFrame:
    """The true mean response of every (task, frozen_layers, train_size) cell of a simulated table.

    Parameters
    ----------
    effects
        ``None`` (default): the per-cell means of the published blog summary
        (``data/reference/blog2020_roberta_base.csv``, RoBERTa-base, 5 seeds per cell) for each task; every
        requested cell must be in it (tasks ``sst2`` and ``cola``, the levels of :data:`BLOG_FROZEN_LEVELS` and
        :data:`BLOG_TRAIN_SIZES`). A float: the same mean in every cell (a null model, for type-I-error checks).
        A mapping ``{(frozen_layers, train_size): mean}`` used for every task. A DataFrame with columns
        ``frozen_layers, train_size, true_mean`` and optionally ``task``.
    tasks, frozen_levels, train_sizes
        The grid.

    Returns
    -------
    pandas.DataFrame
        One row per cell, sorted by ``task, train_size, frozen_layers``, with columns

        * ``task`` (str)
        * ``frozen_layers`` (int)
        * ``train_size`` (int)
        * ``true_mean`` (float): expected ``best_dev``, ``final_dev`` and ``heldout`` of a run in the cell that
          did not fail (see :func:`simulate_results` for what clipping and failures do to it).

    Raises
    ------
    ValueError
        A requested cell has no mean in ``effects``, or a mean is outside ``[0, 1]``.
    """
    grid = pd.DataFrame(
        [(t, int(k), int(n)) for t in tasks for n in train_sizes for k in frozen_levels],
        columns=["task", "frozen_layers", "train_size"],
    )
    if effects is None:
        table = _blog_means().rename(columns={"mean": "true_mean"})[
            ["task", "frozen_layers", "train_size", "true_mean"]
        ]
        source = "the blog reference (data/reference/blog2020_roberta_base.csv)"
    elif isinstance(effects, (int, float)):
        table = grid.assign(true_mean=float(effects))
        source = "effects"
    elif isinstance(effects, pd.DataFrame):
        table = effects
        if "task" not in table.columns:
            table = grid[["task"]].drop_duplicates().merge(table, how="cross")
        source = "effects"
    else:
        rows = [(k, n, float(m)) for (k, n), m in effects.items()]
        table = (
            grid[["task"]]
            .drop_duplicates()
            .merge(pd.DataFrame(rows, columns=["frozen_layers", "train_size", "true_mean"]), how="cross")
        )
        source = "effects"
    truth = grid.merge(table[["task", "frozen_layers", "train_size", "true_mean"]], how="left")
    missing = truth[truth["true_mean"].isna()]
    if len(missing):
        cells = ", ".join(f"({r.task}, {r.frozen_layers}, {r.train_size})" for r in missing.head(5).itertuples())
        raise ValueError(
            f"every (task, frozen_layers, train_size) cell needs a true mean, but {len(missing)} have none in "
            f"{source}, e.g. {cells}; pass `effects` (a float, a mapping or a DataFrame) that covers the grid."
        )
    bad = truth[(truth["true_mean"] < 0) | (truth["true_mean"] > 1)]
    if len(bad):
        raise ValueError(
            f"true means are accuracies and must lie in [0, 1], but got {bad['true_mean'].tolist()[:5]} in {source}."
        )
    return truth.sort_values(["task", "train_size", "frozen_layers"], ignore_index=True)


def simulate_results(
    effects: Effects = None,
    *,
    tasks: Sequence[str] = ("sst2",),
    frozen_levels: Sequence[int] = BLOG_FROZEN_LEVELS,
    train_sizes: Sequence[int] = BLOG_TRAIN_SIZES,
    seeds: int = 5,
    subset_draws: int = 1,
    seed_sd: float = 0.02,
    subset_sd: float = 0.0,
    resid_sd: float | Mapping[int, float] | pd.DataFrame = 0.03,
    seed_size_sd: float = 0.0,
    order_seeds: int | None = None,
    order_sd: float = 0.0,
    order_size_sd: float = 0.0,
    n_eval: int = 872,
    fail_rate: float = 0.0,
    majority_baseline: float | None = None,
    rng: int | np.random.Generator = 0,
) -> pd.DataFrame:
    r"""A results table shaped like the blog study, drawn from a random-intercept model with known effects.

    Parameters
    ----------
    effects
        The true cell means; see :func:`true_cell_means` (default: the blog's means).
    tasks, frozen_levels, train_sizes
        The grid; every run of every cell is simulated (a balanced design).
    seeds
        Number of training seeds, labelled ``1..seeds`` as the runner does; every seed runs in every cell.
    subset_draws
        Number of independent training-subset draws, labelled ``0..subset_draws-1``, crossed with seeds.
    seed_sd, subset_sd, resid_sd
        Standard deviations of the seed intercept, the subset-draw intercept and the run-level residual.
        ``resid_sd`` may differ by train size (a mapping ``{train_size: sd}``, as fine-tuning runs do: their
        spread shrinks ~15x from 50 to 1000 examples) or by cell (a DataFrame with columns ``train_size,
        frozen_layers, sd`` and optionally ``task``).
    seed_size_sd
        Standard deviation of a seed-by-size intercept (a seed's luck that differs between train sizes), the
        ``(1 | seed:train_size)`` term of the default model.
    order_seeds
        Number of data-order seeds crossed with the seeds (the runner's ``[grid] order_seeds``, Dodge et al.
        2020), labelled ``1..order_seeds``: every seed runs with every order seed in every cell. ``None``
        (default): not crossed, the data order follows the seed (``order_seed = seed``), as in a study without
        ``order_seeds``; the table is then the one simulated before this option existed.
    order_sd, order_size_sd
        Standard deviations of the order-seed intercept (shared by every cell of a task, like the seed's) and
        of an order-seed-by-size intercept; they need ``order_seeds``.
    n_eval
        Size of the evaluation set; sets ``n_eval`` and ``n_correct``.
    fail_rate
        Probability that a run collapses (``failed=True``); its responses are then the majority baseline.
    majority_baseline
        Accuracy of the constant majority-class predictor; default 444/872 for ``sst2``, 721/1043 for
        ``cola`` (the GLUE validation splits) and 0.5 for any other task.
    rng
        Seed or generator; the same value gives the same table.

    Returns
    -------
    pandas.DataFrame
        One row per run with the runner's columns (:data:`freezestats.results.export.RESULT_COLUMNS`), sorted like
        :func:`freezestats.results.export.results_table`. Simulated values: ``task, frozen_layers, train_size,
        subset_draw, seed, best_dev, final_dev, heldout, failed, n_eval, n_correct, majority_baseline`` and the
        counts of the best and held-out checkpoints (``n_correct_best``, ``n_correct_heldout`` of
        ``n_eval_heldout``, the score half), rounded from ``best_dev`` and ``heldout``.
        ``order_seed`` is ``1..order_seeds`` when crossed, else equal to ``seed``.
        Constants: ``study='simulated'``, ``state='complete'``, ``role='grid'``, ``model='simulated'``,
        ``freezing='freeze'``, ``metric='accuracy'``, ``n_layers=max(frozen_levels)``, ``lr_search='none'``,
        ``device='simulated'``, ``trial`` numbers runs from 0. Columns the simulation has no model for
        (``learning_rate``, steps, parameter counts, timings, artifacts) are missing values.

    Raises
    ------
    ValueError
        An argument is out of range, or ``effects`` does not cover the grid.

    Notes
    -----
    For task :math:`t`, cell :math:`(k, n)` (frozen layers, train size), seed :math:`s` and subset draw
    :math:`d`, a run that does not fail has

    .. math::

        y = \mu_{t,k,n} + u_{t,s} + v_{t,d} + \varepsilon, \quad
        u \sim N(0, \sigma_{seed}^2),\; v \sim N(0, \sigma_{subset}^2),\; \varepsilon \sim N(0, \sigma^2)

    with independent :math:`\varepsilon` for ``best_dev``, ``final_dev`` and ``heldout`` (so the three share the
    truth of :func:`true_cell_means`; ``best_dev >= final_dev`` is *not* enforced). The seed intercept is shared
    by every cell of a task (the model's ``(1 | seed)``); the subset-draw intercept too, because the runner's
    subsets are nested prefixes of one ordering per draw (:mod:`freezestats.tasks.subsets`). Values are clipped to
    ``[0, 1]`` (negligible for the defaults: the blog means lie in [0.5, 0.93]). ``final_dev`` is the accuracy
    of the final checkpoint, so it is rounded to ``n_correct / n_eval`` with ``n_correct = round(final_dev *
    n_eval)``, as the runner counts it.

    With ``order_seeds``, a run is indexed by seed :math:`s` and order seed :math:`o` (every pair in every
    cell) and adds :math:`r_{t,o} + x_{t,o,n}` to :math:`y`: an order-seed intercept (SD ``order_sd``, shared by
    every cell of a task, the ``(1 | order_seed)`` term) and an order-by-size intercept (SD ``order_size_sd``,
    ``(1 | order_seed:train_size)``), just as ``seed_size_sd`` adds a seed-by-size one.

    With probability ``fail_rate`` a run fails independently of everything else: ``failed=True`` and all three
    responses equal the majority baseline; its expected value is then
    :math:`(1 - p)\mu + p \cdot \text{baseline}`, not ``true_mean``.

    Examples
    --------
    >>> from freezestats.stats import simulate_results
    >>> table = simulate_results(rng=1)
    >>> table.shape[0], sorted(table["frozen_layers"].unique()) == [-1, 0, 2, 4, 8, 10, 12]
    (175, True)
    """
    draws = _Draws(
        seeds=seeds, subset_draws=subset_draws, n_eval=n_eval, seed_sd=seed_sd, subset_sd=subset_sd,
        seed_size_sd=seed_size_sd, order_seeds=order_seeds, order_sd=order_sd, order_size_sd=order_size_sd,
        fail_rate=fail_rate, resid_sd=resid_sd, majority_baseline=majority_baseline,
    )  # fmt: skip
    gen = np.random.default_rng(rng)
    truth = true_cell_means(effects, tasks=tasks, frozen_levels=frozen_levels, train_sizes=train_sizes)
    frames = [_simulate_task(task, cells, gen, draws) for task, cells in truth.groupby("task", sort=False)]
    return _as_results_table(frames, order_seeds is None, frozen_levels)


@dataclass(frozen=True)
class _Draws:
    """simulate_results' generating settings, each refused in one line when out of range."""

    seeds: int
    subset_draws: int
    n_eval: int
    seed_sd: float
    subset_sd: float
    seed_size_sd: float
    order_seeds: int | None
    order_sd: float
    order_size_sd: float
    fail_rate: float
    resid_sd: float | Mapping[int, float] | pd.DataFrame
    majority_baseline: float | None

    def __post_init__(self) -> None:
        # plain names, so each message's {name=} reads "seeds=0" as simulate_results' arguments do
        seeds, subset_draws, n_eval = self.seeds, self.subset_draws, self.n_eval
        seed_sd, subset_sd, seed_size_sd = self.seed_sd, self.subset_sd, self.seed_size_sd
        order_seeds, order_sd, order_size_sd, fail_rate = (
            self.order_seeds,
            self.order_sd,
            self.order_size_sd,
            self.fail_rate,
        )
        if seeds < 1 or subset_draws < 1 or n_eval < 1:
            raise ValueError(
                f"`seeds`, `subset_draws` and `n_eval` must be >= 1, but got {seeds=}, {subset_draws=}, {n_eval=}."
            )
        if min(seed_sd, subset_sd, seed_size_sd) < 0:
            raise ValueError(f"standard deviations must be >= 0, but got {seed_sd=}, {subset_sd=}, {seed_size_sd=}.")
        if order_seeds is None:
            if order_sd != 0 or order_size_sd != 0:
                raise ValueError(
                    f"`order_sd` and `order_size_sd` need `order_seeds` (the data order has no seeds of its own "
                    f"without it), but got {order_sd=}, {order_size_sd=} and order_seeds=None."
                )
        elif isinstance(order_seeds, bool) or not isinstance(order_seeds, (int, np.integer)) or order_seeds < 1:
            raise ValueError(f"`order_seeds` must be None or an integer >= 1, but got {order_seeds=}.")
        if min(order_sd, order_size_sd) < 0:
            raise ValueError(f"standard deviations must be >= 0, but got {order_sd=}, {order_size_sd=}.")
        if not 0 <= fail_rate <= 1:
            raise ValueError(f"`fail_rate` must be in [0, 1], but got {fail_rate=}.")


def _simulate_task(task: object, cells: pd.DataFrame, gen: np.random.Generator, draws: _Draws) -> pd.DataFrame:
    """One task's runs, drawn from ``gen`` in the order simulate_results always drew them (seeded tables stay
    the same): seed, subset-draw, seed x size and order effects, then the three responses and failures."""
    seeds, subset_draws, n_eval, order_seeds = draws.seeds, draws.subset_draws, draws.n_eval, draws.order_seeds
    seed_ids = np.arange(1, seeds + 1)
    draw_ids = np.arange(subset_draws)
    u = gen.normal(0.0, draws.seed_sd, size=seeds)
    v = gen.normal(0.0, draws.subset_sd, size=subset_draws)
    runs = cells.merge(pd.DataFrame({"subset_draw": draw_ids}), how="cross").merge(
        pd.DataFrame({"seed": seed_ids}), how="cross"
    )
    if order_seeds is not None:
        runs = runs.merge(pd.DataFrame({"order_seed": np.arange(1, order_seeds + 1)}), how="cross")
    n = len(runs)
    eta = runs["true_mean"].to_numpy() + u[runs["seed"].to_numpy() - 1] + v[runs["subset_draw"].to_numpy()]
    size_codes, _ = pd.factorize(runs["train_size"], sort=True)
    if draws.seed_size_sd > 0:  # drawn only when used, so tables simulated before this option are unchanged
        w = gen.normal(0.0, draws.seed_size_sd, size=(seeds, size_codes.max() + 1))
        eta = eta + w[runs["seed"].to_numpy() - 1, size_codes]
    if order_seeds is not None:  # likewise: nothing is drawn for a table that does not cross order seeds
        order_codes = runs["order_seed"].to_numpy() - 1
        eta = eta + gen.normal(0.0, draws.order_sd, size=order_seeds)[order_codes]
        if draws.order_size_sd > 0:
            x = gen.normal(0.0, draws.order_size_sd, size=(order_seeds, size_codes.max() + 1))
            eta = eta + x[order_codes, size_codes]
    sd = _run_sds(runs.assign(task=task), draws.resid_sd)
    best, final, heldout = (np.clip(eta + sd * gen.standard_normal(n), 0.0, 1.0) for _ in range(3))
    baseline = _MAJORITY_BASELINE.get(str(task), 0.5) if draws.majority_baseline is None else draws.majority_baseline
    failed = gen.random(n) < draws.fail_rate
    best, final, heldout = (np.where(failed, baseline, x) for x in (best, final, heldout))
    n_correct = np.rint(final * n_eval).astype(int)
    n_half = n_eval - n_eval // 2  # the score half of the validation set, which heldout is measured on
    runs = runs.drop(columns="true_mean").assign(
        n_correct_best=np.rint(best * n_eval).astype(int),
        n_correct_heldout=np.rint(heldout * n_half).astype(int),
        n_eval_heldout=n_half,
        best_dev=best,
        final_dev=n_correct / n_eval,
        heldout=heldout,
        failed=failed,
        n_eval=n_eval,
        n_correct=n_correct,
        majority_baseline=baseline,
    )
    return runs


def _as_results_table(frames: list[pd.DataFrame], not_crossed: bool, frozen_levels: Sequence[int]) -> pd.DataFrame:
    """The tasks' runs as the export's table: sorted as results_table sorts, the constant columns filled in."""
    table = pd.concat(frames, ignore_index=True)
    if not_crossed:
        table["order_seed"] = table["seed"]  # not crossed: the data order follows the seed, as the runner records
    keys = ["task", "train_size", "frozen_layers", "subset_draw", "seed", "order_seed"]
    table = table.sort_values(keys, ignore_index=True).assign(
        study="simulated",
        trial=lambda f: np.arange(len(f)),
        state="complete",
        role="grid",
        model="simulated",
        freezing="freeze",
        n_layers=max(max(frozen_levels), 0),
        lr_search="none",
        metric="accuracy",
        device="simulated",
        fail_reason=lambda f: np.where(f["failed"], "simulated collapse", None),
        trained_with=lambda f: f["task"],  # every simulated task is trained alone
        arm="freeze",  # a single-arm study, as the export fills it in
        arm_level=lambda f: f["frozen_layers"],
        pair_encoding="cross",
    )
    return table.reindex(columns=RESULT_COLUMNS)


def _run_sds(runs: pd.DataFrame, resid_sd: float | Mapping[int, float] | pd.DataFrame) -> np.ndarray:
    """The residual SD of every run: one number, one per train size, or one per cell."""
    if isinstance(resid_sd, pd.DataFrame):
        keys = ["train_size", "frozen_layers"]
        keys = ["task", *keys] if "task" in resid_sd.columns else keys
        merged = runs[keys].merge(resid_sd[[*keys, "sd"]], on=keys, how="left")
        sd = merged["sd"].to_numpy(dtype=float)
    elif isinstance(resid_sd, Mapping):
        sd = runs["train_size"].map(lambda n: resid_sd.get(int(n), np.nan)).to_numpy(dtype=float)
    else:
        sd = np.full(len(runs), float(resid_sd))
    if np.isnan(sd).any() or (sd < 0).any():
        raise ValueError("`resid_sd` must give a standard deviation >= 0 for every simulated cell.")
    return sd


def blog_run_sds(task: str = "sst2", *, per: str = "size") -> dict[int, float] | pd.DataFrame:
    """The run-to-run SDs of the blog's appendix, as :func:`simulate_results`'s ``resid_sd`` takes them.

    ``per="size"``: the median cell SD of each train size, ``{train_size: sd}`` (SST-2: 0.071 at 50 down to
    0.0044 at 1000). ``per="cell"``: every cell's own SD, a DataFrame ``train_size, frozen_layers, sd`` (up to
    9x apart within one size, and 0 where all five seeds collapsed to the majority class). The appendix's SDs
    are over 5 seeds, so they include the seed effect; using them as run-level SDs overstates the residual
    slightly, which does not matter for a coverage check.
    """
    table = _blog_means()
    rows = table[table["task"] == task]
    if rows.empty:
        raise ValueError(f"`task` must be one of {sorted(table['task'].unique())}, but got {task!r}.")
    if per == "size":
        return {int(n): float(sd) for n, sd in rows.groupby("train_size")["std"].median().items()}
    if per == "cell":
        return rows[["train_size", "frozen_layers", "std"]].rename(columns={"std": "sd"}).reset_index(drop=True)
    raise ValueError(f"`per` must be 'size' or 'cell', but got {per!r}.")
