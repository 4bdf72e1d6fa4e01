"""Coverage, familywise error and power of the answer (``freezestats.analysis.decision``), and the plan's promised
power against the rejection rate, on scenarios the method was not tuned on.

The method was fixed first (crossed ANOVA interval, exact McNemar, fixed sequence per size, alpha 0.025); nothing
here feeds back into it. The simulator is not the model the interval assumes (additive seeds + items + residual
on the points scale): a run's per-item correctness is Bernoulli(logistic(theta + a_i + g_id)), with

- theta = beta_d + u_s + z_sd + v_sd: a seed/subset effect u shared by the seed's runs, a subset x depth effect z
  (drawn per seed, or once per study when every seed shares one subset: then the truth is the cost on that
  subset), and a seed x depth effect v (normal, or Student t with 3 df for heavy tails);
- item easiness a_i from two classes (class imbalance: the minority class is harder), an item x depth effect
  g_id, and label noise (a share of items whose label is wrong: right becomes wrong);
- collapse tied to skill: a run collapses with probability logistic(kappa (c - theta)).

The truth of "cost when both train" is E[acc(theta_d) - acc(theta_0) | neither collapsed] over new seeds (and,
with per-seed subsets, new subsets) and new items, by Monte Carlo over 400,000 seed draws, acc(.) integrated over
200,000 items. A verdict is false when it claims "within" where the truth is <= -m, "beyond" where the truth is
>= -m, or "collapses more often" where the true collapse rate is not higher.

    python bench/decision_validation.py [--studies 1000] [--plan-studies 2000] > bench/results/decision_validation.txt
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.special import expit

from freezestats.stats.decision.crossed import crossed_cost
from freezestats.stats.decision.excess import excess_collapse_p
from freezestats.stats.decision.plan import power
from freezestats.stats.decision.verdicts import DepthEvidence, fixed_sequence

DEPTHS = (0, -1, 1, 2, 4, 6)
MARGIN = 1.0


@dataclass(frozen=True)
class Scenario:
    name: str
    beta: tuple[float, ...] = (2.0, 2.0, 1.985, 1.94, 1.86, 1.55)  # per depth (DEPTHS order), logits
    sd_seed: float = 0.15  # u: shared by a seed's runs
    sd_seed_depth: float = 0.035  # v: seed x depth
    heavy: bool = False  # v ~ t3 scaled to that SD
    sd_subset_depth: float = 0.0  # z: subset x depth
    shared_subset: bool = False
    minority: float = 0.5  # share of label-1 items
    class_gap: float = 0.0  # minority items this much harder (logits)
    label_noise: float = 0.0
    sd_item: float = 1.6
    sd_item_depth: float = 0.5
    collapse_c: float = -9.0  # collapse probability logistic(kappa (c - theta)); -9: almost never
    collapse_kappa: float = 6.0


SCENARIOS = (
    Scenario("normal, subset per seed"),
    Scenario("heavy-tailed seed x depth (t3)", heavy=True),
    Scenario("imbalance 0.8/0.2 + 10% label noise", minority=0.2, class_gap=1.0, label_noise=0.10),
    Scenario("collapse tied to skill", sd_seed=0.6, collapse_c=1.2, beta=(2.0, 1.98, 1.96, 1.9, 1.8, 1.5)),
    Scenario("shared subset, subset x depth = 3x seed SD", sd_subset_depth=0.105, shared_subset=True),
)


def _item_easiness(sc: Scenario, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    minority = rng.random(n) < sc.minority
    a = rng.normal(0, sc.sd_item, n) - np.where(minority, sc.class_gap, 0.0) * (sc.minority < 0.5)
    noisy = rng.random(n) < sc.label_noise
    return a, noisy


def _acc_curve(sc: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """acc(theta) over the item population (item x depth effect included), on a grid for interpolation."""
    rng = np.random.default_rng(0)
    a, noisy = _item_easiness(sc, 200_000, rng)
    a = a + rng.normal(0, sc.sd_item_depth, a.size)
    grid = np.linspace(-2, 6, 401)
    acc = np.array([np.mean(np.where(noisy, 1 - expit(t + a), expit(t + a))) for t in grid])
    return grid, acc


def _seed_depth(sc: Scenario, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if sc.heavy:
        return sc.sd_seed_depth * rng.standard_t(3, shape) / np.sqrt(3.0)
    return rng.normal(0, sc.sd_seed_depth, shape)


def _thetas(sc: Scenario, seeds: int, rng: np.random.Generator, subset: np.ndarray | None) -> np.ndarray:
    """(depths, seeds) skills; ``subset`` is a shared (depths,) subset x depth effect, else drawn per seed."""
    d = len(DEPTHS)
    z = subset[:, None] if subset is not None else rng.normal(0, sc.sd_subset_depth, (d, seeds))
    return np.array(sc.beta)[:, None] + rng.normal(0, sc.sd_seed, seeds)[None, :] + z + _seed_depth(sc, (d, seeds), rng)


def truths(sc: Scenario, curve: tuple[np.ndarray, np.ndarray], subset: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Per depth (DEPTHS[1:]): true cost when both train (points), and true collapse rate minus full's."""
    rng = np.random.default_rng(1 if subset is None else int(abs(subset.sum()) * 1e6) % 2**32)
    theta = _thetas(sc, 400_000 if subset is None else 50_000, rng, subset)
    live = rng.random(theta.shape) >= expit(sc.collapse_kappa * (sc.collapse_c - theta))
    acc = np.interp(theta, *curve) * 100
    cost = np.array([np.mean((acc[j] - acc[0])[live[j] & live[0]]) for j in range(1, len(DEPTHS))])
    excess = np.array([np.mean(~live[j]) - np.mean(~live[0]) for j in range(1, len(DEPTHS))])
    return cost, excess


def one_study(sc: Scenario, seeds: int, items: int, rng: np.random.Generator, subset: np.ndarray | None) -> list:
    theta = _thetas(sc, seeds, rng, subset)
    gone = rng.random(theta.shape) < expit(sc.collapse_kappa * (sc.collapse_c - theta))
    a, noisy = _item_easiness(sc, items, rng)
    logits = theta[:, :, None] + a[None, None, :] + rng.normal(0, sc.sd_item_depth, (len(DEPTHS), 1, items))
    right = rng.random(logits.shape) < expit(logits)
    points = 100.0 * np.where(noisy[None, None, :], ~right, right)
    evidence = []
    for j, depth in enumerate(DEPTHS[1:], start=1):
        both = ~gone[j] & ~gone[0]
        diffs = points[j][both] - points[0][both]
        b, c = int(np.sum(gone[j] & ~gone[0])), int(np.sum(gone[0] & ~gone[j]))
        cost = crossed_cost(diffs) if both.sum() >= 3 else None
        evidence.append(DepthEvidence(depth, seeds, int(both.sum()), int(gone[j].sum()), int(gone[0].sum()), b, c,
                                      cost, excess_collapse_p(b, c)))  # fmt: skip
    return fixed_sequence(evidence, MARGIN)


def run_config(sc: Scenario, seeds: int, items: int, studies: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    curve = _acc_curve(sc)
    base_cost, base_excess = truths(sc, curve, None)
    nd = len(DEPTHS) - 1
    covered, counted, within, beyond, reached, own = (np.zeros(nd) for _ in range(6))
    family_error = 0
    for _ in range(studies):
        subset = rng.normal(0, sc.sd_subset_depth, len(DEPTHS)) if sc.shared_subset else None
        cost, excess = (base_cost, base_excess) if subset is None else truths(sc, curve, subset)
        verdicts = one_study(sc, seeds, items, rng, subset)
        wrong = False
        for j, v in enumerate(verdicts):
            c = v.evidence.cost
            if c is not None:
                counted[j] += 1
                covered[j] += c.ci_low <= cost[j] <= c.ci_high
                own[j] += c.ci_low > -MARGIN
            within[j] += v.within
            beyond[j] += v.beyond
            reached[j] += v.reached
            wrong |= (v.within and cost[j] <= -MARGIN) or (v.beyond and cost[j] >= -MARGIN)
            wrong |= v.excess and excess[j] <= 0
        family_error += wrong
    return dict(cost=base_cost, covered=covered, counted=counted, within=within / studies, beyond=beyond / studies,
                reached=reached / studies, own=own / np.maximum(counted, 1), fwe=family_error / studies)  # fmt: skip


def wilson_upper(hits: float, n: float) -> float:
    if n == 0:
        return float("nan")
    z, p = 1.96, hits / n
    return (p + z * z / (2 * n) + z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (1 + z * z / n)


def plan_check(sc: Scenario, seeds: int, items: int, studies: int) -> None:
    """The plan's power for depth -1 (from variance parts of a 200-seed oracle study) against its rejection rate."""
    rng = np.random.default_rng(99)
    oracle = replace(sc, collapse_c=-9.0)
    theta = _thetas(oracle, 200, rng, None)
    a, noisy = _item_easiness(oracle, items, rng)
    logits = theta[:2, :, None] + a[None, None, :] + rng.normal(0, oracle.sd_item_depth, (2, 1, items))
    right = rng.random(logits.shape) < expit(logits)
    pts = 100.0 * np.where(noisy[None, None, :], ~right, right)
    parts = crossed_cost(pts[1] - pts[0]).parts
    cost, _ = truths(sc, _acc_curve(sc), None)
    promised = power(parts, seeds, items, MARGIN, true_cost=float(cost[0])).power
    result = run_config(sc, seeds, items, studies, seed=123)
    print(f"plan check, {sc.name}, depth -1 (true cost {cost[0]:+.2f}), {seeds} seeds x {items} items, "
          f"{studies} studies: plan promises {promised:.3f}, rejected in {result['own'][0]:.3f} "
          f"(SD seed of the paired difference {np.sqrt(parts.seed):.2f} points; difference "
          f"{100 * (result['own'][0] - promised):+.1f} points)")  # fmt: skip


def _cpu() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--plan-studies", type=int, default=2000)
    args = parser.parse_args()
    start = time.time()
    print(f"# decision_validation: {_cpu()}, numpy {np.__version__}, "
          f"{args.studies} studies per row; margin {MARGIN} point; alpha 0.025 one-sided per sequence")  # fmt: skip
    plan_check(SCENARIOS[0], 10, 5000, args.plan_studies)
    plan_check(SCENARIOS[1], 10, 5000, args.plan_studies)
    for i, sc in enumerate(SCENARIOS):
        for seeds in (5, 10):
            for items in (436, 5000):
                r = run_config(sc, seeds, items, args.studies, seed=1000 * i + seeds + items)
                print(f"\n{sc.name}: {seeds} seeds, {items} items; familywise error {r['fwe']:.3f} "
                      f"(Wilson upper {wilson_upper(r['fwe'] * args.studies, args.studies):.3f})")  # fmt: skip
                print(f"  {'depth':>5} {'truth':>6} {'cover':>6} {'Wilson up':>9} {'k>=3':>5} {'own test':>8} "
                      f"{'reached':>7} {'within':>6} {'beyond':>6}")  # fmt: skip
                for j, depth in enumerate(DEPTHS[1:]):
                    n = r["counted"][j]
                    cover = r["covered"][j] / n if n else float("nan")
                    up = wilson_upper(r["covered"][j], n)
                    head = f"  {depth:>5} {r['cost'][j]:+6.2f} {cover:6.3f} {up:9.3f} {n / args.studies:5.2f} "
                    print(
                        head + f"{r['own'][j]:8.3f} {r['reached'][j]:7.3f} {r['within'][j]:6.3f} {r['beyond'][j]:6.3f}"
                    )
    print(f"\n# {time.time() - start:.0f} s; t df for the crossed interval: Satterthwaite; scipy {stats.__name__}")


if __name__ == "__main__":
    main()
