r"""Simulated fine-tuning studies that behave like real runs, not like the model the analysis once fitted.

The older simulators (:mod:`~freezestats.stats.simulation.results`, :mod:`~freezestats.stats.simulation.items`)
draw from the additive model the mixed-model analysis assumed: one seed shift shared by every depth, one run
SD per size, no collapsed runs. Data drawn from a model cannot show where that model misfits. Real runs
(``examples/blog2020-minilm``, SST-2, its stored predictions included) differ from it in four ways, and this
simulator has all four:

* **a finite evaluation set**: each study scores its runs on 872 items drawn from a task's item population
  (20,000 items with a latent difficulty and a label, majority share about 0.51), half of them the ``score``
  half that ``heldout`` reads. Depths **disagree on items**: depth :math:`k` finds item :math:`i` easier or
  harder by a fixed :math:`\gamma_{ki}` (a property of the task, the same for every seed), so two depths of
  equal accuracy still get different items right, and a new evaluation set moves their difference;
* **depth-specific run SDs and a depth x seed interaction**: a run's skill is
  :math:`\theta_{kns} = \mu_{kn} + \sigma_{kn} z_{ks}` with :math:`z_{ks} = \rho_k z_{0s} +
  \sqrt{1-\rho_k^2}\,\varepsilon_{ks}`, so a depth near the reference moves with it from seed to seed
  (:math:`\rho = 0.99`) and a deep one may move against it (:math:`\rho = -0.3`); deeper depths are steadier;
* **collapsed runs**: with probability :math:`c_{kn}`, highest at small train sizes and deep depths, a run
  predicts the majority class on every item;
* **runs that lean towards a class**: a healthy run answers item :math:`i` (label :math:`y_i`) right when
  :math:`\theta_{kns} - b_i + \gamma_{ki} + \beta_{ks}(2y_i - 1) + e_{ri} > 0` (probit), with a class lean
  :math:`\beta_{ks} \sim N(0, \tau^2)` correlated across depths like the skill, and run-by-item noise
  :math:`e \sim N(0, \sigma_e^2)`. The lean moves a run's accuracy on each class by several points and its
  accuracy by little, as in the example.

The truths are computed over the whole item population, not from the drawn items: the skill, the lean and
the noise are independent normals, so by :math:`E\,\Phi((\mu + s Z - a)/\sigma) = \Phi((\mu - a)/\sqrt{\sigma^2
+ s^2})` the expected accuracy of a healthy run of depth :math:`k` is the population mean of
:math:`\Phi((\mu_{kn} - b_i + \gamma_{ki}) / \sqrt{\sigma_e^2 + \tau^2 + \sigma_{kn}^2})`, exactly, and a
cell's expected accuracy is :math:`(1 - c_{kn})` times it plus :math:`c_{kn}` times the population's
majority share. ``truth_task`` is that difference to the reference (new seeds *and* new items);
``truth_items`` is the same expectation over seeds on the study's drawn score items (what a seed-only
interval speaks of).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import optimize, special

from freezestats.stats.simulation.scenario import Cell, Scenario, check_scenario

__all__ = ["RealisticStudy", "RealisticTask", "Scenario", "blog_shaped", "null_at_margin", "realistic_task",
           "seed_shared_collapse", "simulate_realistic"]  # fmt: skip


# The real SST-2 grid (examples/blog2020-minilm/results.csv, task sst2, mean `heldout` of 5 seeds per cell; read
# once and copied here). At 50 examples every depth sits near the majority share (0.509): most runs collapse.
_BLOG_ACCURACY = {
    50: (0.5119, 0.5115, 0.5119, 0.5110, 0.5119, 0.5151, 0.5206),
    100: (0.6913, 0.6931, 0.6794, 0.6514, 0.5381, 0.5275, 0.5225),
    200: (0.7651, 0.7665, 0.7720, 0.7711, 0.7220, 0.5693, 0.5119),
    500: (0.7950, 0.7977, 0.7913, 0.7844, 0.7807, 0.7261, 0.5280),
    1000: (0.8165, 0.8170, 0.8147, 0.8138, 0.7922, 0.7656, 0.5917),
}
_BLOG_DEPTHS = (-1, 0, 1, 2, 4, 5, 6)


def blog_shaped() -> Scenario:
    """The MiniLM SST-2 grid of the blog example: sizes 50..1000, depths -1, 0, 1, 2, 4, 5, 6, 5 seeds.

    Cell means are the example's (collapse included). The reference's healthy run SD on the item population
    falls 15-fold from 50 to 1000 examples (0.030 to 0.002; the blog appendix's SST-2 SDs fall 16-fold, 0.071
    to 0.0044). Deeper depths are steadier (x1 to x0.4), their seed correlation with the reference falls from
    0.99 (-1) to -0.3 (6), and collapse falls from 0.30 (50) to 0.02 (1000) for the reference, up to 2.2
    times that at depth 6: an assumption that stresses the intervals more than the example does (it has
    collapsed runs at 50-200 examples, none in the 70 runs at 500 and 1000), and makes a cell with a collapse
    far wider (SD 0.03-0.07).

    ``noise_sd = 0.12`` and ``class_bias_sd = 0.18`` match the example's item-level spread, measured on its
    stored predictions (``predictions.parquet``) and on 30 simulated studies: a healthy cell's ``heldout`` SD
    at 1000 examples 0.008-0.011 (the example's 0.005-0.010), per-seed differences to the reference 0.008-0.013
    (0.004-0.012), the share of class-1 predictions 0.035-0.065 (0.011-0.064: runs lean towards one class), and
    the items' mean :math:`p(1-p)` over seeds 0.027-0.045 (0.026-0.049). ``item_sd`` grows with depth so that
    the five runs' per-item means of depth -1 track the reference's closely (r 0.95-0.97; the example's
    0.94-0.99), those of depth 2 less (0.84-0.90; 0.87-0.90) and those of depth 4 less again (0.79-0.82;
    0.71-0.80), from 200 examples on.
    """
    return Scenario(
        train_sizes=tuple(_BLOG_ACCURACY),
        depths=_BLOG_DEPTHS,
        accuracy={(n, k): acc for n, row in _BLOG_ACCURACY.items() for k, acc in zip(_BLOG_DEPTHS, row, strict=True)},
        run_sd={50: 0.030, 100: 0.015, 200: 0.008, 500: 0.005, 1000: 0.002},
        depth_sd=dict(zip(_BLOG_DEPTHS, (1.0, 1.0, 0.9, 0.8, 0.6, 0.5, 0.4), strict=True)),
        rho=dict(zip(_BLOG_DEPTHS, (0.99, 1.0, 0.9, 0.75, 0.4, 0.05, -0.3), strict=True)),
        collapse={50: 0.30, 100: 0.12, 200: 0.06, 500: 0.03, 1000: 0.02},
        depth_collapse=dict(zip(_BLOG_DEPTHS, (1.0, 1.0, 1.1, 1.2, 1.5, 1.8, 2.2), strict=True)),
        item_sd=dict(zip(_BLOG_DEPTHS, (0.05, 0.0, 0.15, 0.25, 0.4, 0.5, 0.7), strict=True)),
        noise_sd=0.12,
        class_bias_sd=0.18,
    )


def null_at_margin(margin: float, base: Scenario | None = None) -> Scenario:
    """``base`` (default :func:`blog_shaped`) with every depth's task-level cost exactly ``-margin`` at every
    size: the boundary of every non-inferiority hypothesis, where a familywise error is measured. The
    reference keeps its accuracies; the other depths' healthy skill is solved so that the cell mean, collapse
    included, is the reference's minus ``margin``."""
    base = blog_shaped() if base is None else base
    accuracy = {(n, k): base.accuracy[(n, base.reference)] - (0.0 if k == base.reference else margin)
                for n in base.train_sizes for k in base.depths}  # fmt: skip
    return replace(base, accuracy=accuracy)


def seed_shared_collapse(scenario: Scenario) -> Scenario:
    """``scenario`` with each depth's collapses following the seed as its skill does: ``collapse_rho[k]`` =
    ``max(rho[k], 0)``. Real seeds collapse together at depths that train alike (the 20-seed SST-2 study at 50
    examples: frozen -1 and 2 disagreed with full fine-tuning on 0 and 1 of 15 seeds where independence expects
    4.8 and 4.2 disagreements, ``bench/results/failure_concordance.txt``), and the skill's correlation is the
    scenario's own measure of how alike two depths train; a negative one is not carried over (no data show a
    seed that collapses at one depth being the less likely to at another)."""
    return replace(scenario, collapse_rho={k: max(float(r), 0.0) for k, r in scenario.rho.items()})


@dataclass(frozen=True)
class RealisticTask:
    """A scenario made concrete: its item population and the solved skill of every cell, drawn once per scenario.

    ``offset[j, i]`` is :math:`b_i - \\gamma_{ki}` of depth ``depths[j]`` on population item ``i``; ``mu`` and
    ``sigma`` the healthy skill's mean and SD per cell (latent scale), ``truth_task`` each contrast's truth.
    """

    scenario: Scenario
    labels: np.ndarray
    offset: np.ndarray
    mu: dict[Cell, float]
    sigma: dict[Cell, float]
    accuracy: dict[Cell, float]
    truth_task: dict[Cell, float]

    @property
    def majority_class(self) -> int:
        """The population's majority class: what a collapsed run predicts for every item."""
        return int(self.labels.mean() >= 0.5)


@dataclass(frozen=True)
class RealisticStudy:
    """One simulated study: its results table, its item table, and the two truths of every contrast."""

    results: pd.DataFrame
    items: pd.DataFrame | None
    #: (train_size, frozen_layers) -> expected difference to the reference over new seeds and new items.
    truth_task: dict[Cell, float]
    #: (train_size, frozen_layers) -> expected difference over new seeds on this study's drawn score items.
    truth_items: dict[Cell, float]


def realistic_task(scenario: Scenario) -> RealisticTask:
    """Draw the scenario's item population (seeded by ``population_seed``) and solve every cell's skill."""
    check_scenario(scenario)
    gen = np.random.default_rng(scenario.population_seed)
    labels = (gen.random(scenario.population) < scenario.majority_share).astype(int)
    difficulty = gen.standard_normal(scenario.population)
    shift = np.stack([scenario.item_sd[k] * gen.standard_normal(scenario.population) for k in scenario.depths])
    offset = difficulty[None, :] - shift
    majority = float(max(labels.mean(), 1 - labels.mean()))
    mu, sigma, accuracy = {}, {}, {}
    for n in scenario.train_sizes:
        for j, k in enumerate(scenario.depths):
            c = scenario.collapse_rate(n, k)
            healthy = (scenario.accuracy[(n, k)] - c * majority) / (1 - c)
            sd = scenario.run_sd[n] * scenario.depth_sd[k]
            mu[(n, k)], sigma[(n, k)] = _solve_skill(offset[j], healthy, sd, scenario.item_scale, (n, k))
            expected = _healthy_accuracy(mu[(n, k)], sigma[(n, k)], offset[j], scenario.item_scale).mean()
            accuracy[(n, k)] = float((1 - c) * expected + c * majority)
    ref = scenario.reference
    truth = {(n, k): accuracy[(n, k)] - accuracy[(n, ref)] for n, k in accuracy if k != ref}
    return RealisticTask(scenario, labels, offset, mu, sigma, accuracy, truth)


def _healthy_accuracy(mu: float, sigma: float, offset: np.ndarray, scale: float) -> np.ndarray:
    """Each item's probability that a healthy run of skill N(mu, sigma^2) answers it right (exact, probit: the
    skill, the class lean and the noise are independent normals, so their sum has SD hypot(sigma, scale))."""
    return special.ndtr((mu - offset) / np.hypot(scale, sigma))


def _solve_skill(offset: np.ndarray, healthy: float, sd: float, scale: float, cell: Cell) -> tuple[float, float]:
    """The healthy skill's mean and SD of one cell: its expected accuracy over the population is ``healthy`` and
    its run SD, to first order, ``sd``. The two depend on each other (the SD widens the probit), so the mean
    is solved again after each SD update; after four rounds neither moves by 1e-12 in the blog preset."""
    if not 0 < healthy < 1:
        raise ValueError(
            f"cell {cell}: the healthy runs' accuracy implied by its accuracy and collapse rate must lie in (0, 1), "
            f"but got {healthy:.4f}; lower the collapse rate or raise the accuracy."
        )
    sigma = 0.0
    for _ in range(4):
        mu = _solve_mean(offset, healthy, sigma, scale)
        slope = float(np.mean(np.exp(-0.5 * ((mu - offset) / scale) ** 2)) / (scale * np.sqrt(2 * np.pi)))
        sigma = sd / slope
    mu = _solve_mean(offset, healthy, sigma, scale)
    return float(mu), float(sigma)


def _solve_mean(offset: np.ndarray, healthy: float, sigma: float, scale: float) -> float:
    """The skill mean whose expected accuracy over the population is ``healthy`` (it rises with the mean)."""
    return float(
        optimize.brentq(lambda m: _healthy_accuracy(m, sigma, offset, scale).mean() - healthy, -12, 12, xtol=1e-12)
    )


def simulate_realistic(
    task: Scenario | RealisticTask, *, rng: int | np.random.Generator | None = None, items: bool = True
) -> RealisticStudy:
    """One simulated study of ``task`` (a scenario, or one made concrete by :func:`realistic_task` to reuse).

    Returns
    -------
    RealisticStudy
        ``results``: one row per run (``scenario.seeds`` per cell, seeds 1..S, one subset draw) with the
        columns of :mod:`freezestats.stats.simulation.items`' table (``heldout`` on the score half,
        ``best_dev``/``final_dev`` on all items, ``failed`` = collapsed, ``majority_baseline`` the drawn
        items' majority share); ``items``: every run's prediction of every drawn item (``idx`` 0..n_items-1,
        ``half`` score/select; the three checkpoints predict alike; ``None`` with ``items=False``, for studies too
        large for a row per run and item); ``truth_task`` and ``truth_items``.

    Examples
    --------
    >>> study = simulate_realistic(blog_shaped(), rng=0)
    >>> len(study.results), len(study.items), round(study.truth_task[(1000, 4)], 4)
    (175, 152600, -0.0248)
    """
    task = realistic_task(task) if isinstance(task, Scenario) else task
    scenario, gen = task.scenario, np.random.default_rng(rng)
    drawn = gen.choice(scenario.population, scenario.n_items, replace=False)
    half = np.where(gen.permutation(scenario.n_items) < scenario.n_items // 2, "select", "score")
    score, labels = half == "score", task.labels[drawn]
    correct, collapsed = [], []
    for n in scenario.train_sizes:
        c_n, fail_n = _size_runs(task, n, drawn, gen)
        correct.append(c_n)
        collapsed.append(fail_n)
    correct_all = np.concatenate(correct)  # (runs, items), runs ordered by size, depth, seed
    failed = np.concatenate(collapsed)
    results = _results_table(task, correct_all, failed, score, labels)
    table = _items_table(task, correct_all, labels, half) if items else None
    return RealisticStudy(results, table, dict(task.truth_task), _truth_on_items(task, drawn[score]))


def _size_runs(
    task: RealisticTask, size: int, drawn: np.ndarray, gen: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Every run of one train size on the drawn items: correctness (depths x seeds, items) and collapse flags.

    The skill and the class lean of a seed are each one standard normal for the reference, and each depth's is
    correlated with it by ``rho``; a new size draws new seeds (its subset differs, so its runs share nothing
    with the other sizes' beyond the seed number)."""
    scenario = task.scenario
    depths, seeds = scenario.depths, scenario.seeds
    rho = np.array([scenario.rho[k] for k in depths])[:, None]
    z, lean = (_correlated(rho, seeds, gen) for _ in range(2))
    mu = np.array([task.mu[(size, k)] for k in depths])[:, None]
    sigma = np.array([task.sigma[(size, k)] for k in depths])[:, None]
    skill = mu + sigma * z  # (depths, seeds)
    side = 2.0 * (task.labels[drawn] == 1) - 1.0  # a lean towards class 1 helps its items and hurts class 0's
    noise = scenario.noise_sd * gen.standard_normal((len(depths), seeds, len(drawn)))
    latent = skill[:, :, None] + scenario.class_bias_sd * lean[:, :, None] * side[None, None, :]
    healthy = latent - task.offset[:, drawn][:, None, :] + noise > 0
    rate = np.array([scenario.collapse_rate(size, k) for k in depths])[:, None]
    if scenario.collapse_rho is None:
        failed = gen.random((len(depths), seeds)) < rate
    else:  # a Gaussian copula: each depth's uniform draw correlated with the reference's, seed by seed
        shared = np.array([scenario.collapse_rho[k] for k in depths])[:, None]
        failed = special.ndtr(_correlated(shared, seeds, gen)) < rate
    majority_right = (task.labels[drawn] == task.majority_class)[None, None, :]
    correct = np.where(failed[:, :, None], majority_right, healthy)
    return correct.reshape(len(depths) * seeds, len(drawn)), failed.reshape(-1)


def _correlated(rho: np.ndarray, seeds: int, gen: np.random.Generator) -> np.ndarray:
    """Standard normals (depths x seeds) whose depth j correlates ``rho[j]`` with the reference, seed by seed."""
    return rho * gen.standard_normal(seeds)[None, :] + np.sqrt(1 - rho**2) * gen.standard_normal((len(rho), seeds))


def _run_keys(scenario: Scenario) -> dict[str, np.ndarray]:
    """The trial, size, depth and seed of every run, in the order the runs are simulated."""
    sizes, depths, seeds = np.meshgrid(scenario.train_sizes, scenario.depths, np.arange(1, scenario.seeds + 1),
                                       indexing="ij")  # fmt: skip
    return {"trial": np.arange(sizes.size), "train_size": sizes.reshape(-1), "frozen_layers": depths.reshape(-1),
            "seed": seeds.reshape(-1)}  # fmt: skip


def _results_table(
    task: RealisticTask, correct: np.ndarray, failed: np.ndarray, score: np.ndarray, labels: np.ndarray
) -> pd.DataFrame:
    """The results table as ``freezestats export`` writes the columns the analysis reads (one row per run)."""
    keys = _run_keys(task.scenario)
    share = float(labels.mean())
    n_correct, n_heldout = correct.sum(axis=1), correct[:, score].sum(axis=1)
    table = pd.DataFrame(
        {
            "trial": keys["trial"], "state": "complete", "role": "grid", "task": task.scenario.task,
            "model": "simulated", "metric": "accuracy", "frozen_layers": keys["frozen_layers"],
            "train_size": keys["train_size"], "subset_draw": 0, "seed": keys["seed"], "order_seed": keys["seed"],
            "heldout": n_heldout / score.sum(), "best_dev": n_correct / len(labels),
            "final_dev": n_correct / len(labels), "failed": failed, "majority_baseline": max(share, 1 - share),
            "n_eval": len(labels), "n_correct": n_correct, "n_correct_best": n_correct,
            "n_correct_heldout": n_heldout, "n_eval_heldout": int(score.sum()),
        }
    )  # fmt: skip
    return table


def _items_table(task: RealisticTask, correct: np.ndarray, labels: np.ndarray, half: np.ndarray) -> pd.DataFrame:
    """Every run's prediction of every drawn item (a wrong answer is the other class)."""
    keys = _run_keys(task.scenario)
    runs, n_items = correct.shape
    predictions = np.where(correct, labels[None, :], 1 - labels[None, :]).reshape(-1)
    frame = {name: np.repeat(values, n_items) for name, values in keys.items()}
    return pd.DataFrame(
        {
            "trial": frame["trial"], "task": task.scenario.task, "frozen_layers": frame["frozen_layers"],
            "train_size": frame["train_size"], "subset_draw": 0, "seed": frame["seed"], "order_seed": frame["seed"],
            "idx": np.tile(np.arange(n_items), runs), "label": np.tile(labels, runs),
            "half": pd.Categorical(np.tile(half, runs), categories=["score", "select"]),
            "prediction_best": predictions, "prediction_heldout": predictions, "prediction_final": predictions,
        }
    )  # fmt: skip


def _truth_on_items(task: RealisticTask, scored: np.ndarray) -> dict[Cell, float]:
    """Each contrast's expectation over new seeds (skill, run-by-item noise, collapse) on the drawn score items."""
    scenario = task.scenario
    majority = float(np.mean(task.labels[scored] == task.majority_class))
    expected = {}
    for n in scenario.train_sizes:
        for j, k in enumerate(scenario.depths):
            c = scenario.collapse_rate(n, k)
            healthy = _healthy_accuracy(
                task.mu[(n, k)], task.sigma[(n, k)], task.offset[j, scored], scenario.item_scale
            )
            expected[(n, k)] = (1 - c) * float(healthy.mean()) + c * majority
    ref = scenario.reference
    return {(n, k): v - expected[(n, ref)] for (n, k), v in expected.items() if k != ref}
