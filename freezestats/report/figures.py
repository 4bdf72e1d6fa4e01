"""The report's figures, drawn with matplotlib (Agg) from the analysis tables and the runs, saved as SVG.

Every function takes tidy tables of *one* task and returns a matplotlib Figure; :func:`save` writes it.
Nothing here computes a statistic: the points, means and intervals come from the analysis tables (or are
the runs themselves). Figures are 7 inches wide with 9–10 pt text, so that they read at the PDF's text
width and at the HTML page's width alike; text is stored as paths so both renderers show the same glyphs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "blog_figure",
    "compute_figure",
    "emm_heatmap",
    "failure_figure",
    "forest_plot",
    "frozen_label",
    "frozen_order",
    "interaction_plot",
    "lee_figure",
    "reference_figure",
    "save",
    "spread_figure",
]

WIDTH = 7.0
_STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "svg.fonttype": "path",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
}


def _plt():  # the pyplot module, configured
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(_STYLE)
    return plt


def frozen_order(levels: Sequence[int]) -> list[int]:
    """Frozen levels from least to most frozen: 0 (nothing), -1 (embeddings only), then 1, 2, ..."""
    return sorted({int(v) for v in levels}, key=lambda k: 0.5 if k == -1 else float(k))


def frozen_label(level: int) -> str:
    """Axis label of a frozen level (``-1`` is the embeddings only; a missing level, as where no depth reached
    a criterion, is a dash)."""
    if pd.isna(level):
        return "–"
    return "emb." if int(level) == -1 else str(int(level))


def _size_colors(sizes: Sequence[int]) -> dict[int, tuple[float, ...]]:
    plt = _plt()
    cmap = plt.get_cmap("viridis")
    sizes = sorted(sizes)
    return {s: cmap(0.72 * i / max(len(sizes) - 1, 1)) for i, s in enumerate(sizes)}  # no pale yellow


def _frozen_axis(ax: Axes, order: list[int], label: str = "frozen layers") -> None:
    ax.set_xticks(range(len(order)), [frozen_label(k) for k in order])
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.set_xlabel(label)


def legend_below(fig: Figure, ax: Axes) -> None:
    """One legend for the whole figure, under the panels, from the handles of ``ax``."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=max(len(labels), 1), frameon=False)


def save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` as SVG (by suffix) and close it; returns the path."""
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


def blog_figure(runs: pd.DataFrame, summary: pd.DataFrame, response: str, metric: str) -> Figure:
    """The blog's figure: ``response`` vs frozen layers, one panel per train size, one dot per run.

    The cell mean (from the analysis' ``cell_summary``) is the line; the majority-class baseline is dashed;
    failed runs are red crosses, so a cell's mean is never read without seeing what it averages.
    """
    plt = _plt()
    sizes = sorted(int(s) for s in runs["train_size"].unique())
    order = frozen_order(runs["frozen_layers"])
    ncols = min(3, len(sizes))
    nrows = math.ceil(len(sizes) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(WIDTH, 2.5 * nrows + 0.4), sharey=True, squeeze=False, constrained_layout=True
    )
    rng = np.random.default_rng(0)
    position = {k: i for i, k in enumerate(order)}
    for ax, size in zip(axes.flat, sizes, strict=False):
        cell = runs[runs["train_size"] == size]
        x = cell["frozen_layers"].map(position).to_numpy(float) + rng.uniform(-0.12, 0.12, len(cell))
        failed = cell["failed"].fillna(False).astype(bool).to_numpy() if "failed" in cell else np.zeros(len(cell), bool)
        y = cell[response].to_numpy(float)
        ax.scatter(x[~failed], y[~failed], s=14, color="#3b6ea5", alpha=0.75, label="run", zorder=3)
        if failed.any():
            ax.scatter(x[failed], y[failed], s=22, color="#c0392b", marker="x", label="failed run", zorder=3)
        means = summary[summary["train_size"] == size].copy()
        means["pos"] = means["frozen_layers"].map(position)
        means = means.sort_values("pos")
        ax.plot(means["pos"], means["mean"], color="black", lw=1.2, marker="_", ms=10, label="cell mean", zorder=4)
        baseline = cell["majority_baseline"].dropna() if "majority_baseline" in cell else pd.Series(dtype=float)
        if len(baseline):
            ax.axhline(float(baseline.median()), color="#7f7f7f", ls="--", lw=1, label="majority class")
        ax.set_title(f"n = {size}")
        _frozen_axis(ax, order)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes.flat[len(sizes) :]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel(f"{metric} ({response})")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    for ax in axes.flat[1 : len(sizes)]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(lab, h)
    fig.legend(seen.values(), seen.keys(), loc="outside lower center", ncols=len(seen), frameon=False)
    return fig


def emm_heatmap(emmeans: pd.DataFrame, metric: str) -> Figure:
    """Model-based cell means as a frozen × size grid, each cell annotated with its value."""
    plt = _plt()
    order = frozen_order(emmeans["frozen_layers"])
    sizes = sorted(int(s) for s in emmeans["train_size"].unique())
    grid = emmeans.pivot_table(index="frozen_layers", columns="train_size", values="emmean").reindex(
        index=order, columns=sizes
    )
    height = max(2.4, 0.38 * len(order) + 1.2)
    fig, ax = plt.subplots(figsize=(min(WIDTH, 1.3 * len(sizes) + 2.6), height), constrained_layout=True)
    image = ax.imshow(grid.to_numpy(float), cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
    ax.set_yticks(range(len(order)), [frozen_label(k) for k in order])
    ax.set_xlabel("train size")
    ax.set_ylabel("frozen layers")
    values = grid.to_numpy(float)
    finite = values[np.isfinite(values)]
    middle = (finite.min() + finite.max()) / 2 if finite.size else 0
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            if np.isfinite(values[i, j]):
                color = "white" if values[i, j] < middle else "black"
                ax.text(j, i, f"{values[i, j]:.3f}", ha="center", va="center", fontsize=8, color=color)
    for side in ("top", "right"):
        ax.spines[side].set_visible(True)
    fig.colorbar(image, ax=ax, label=f"estimated mean {metric}")
    return fig


def interaction_plot(emmeans: pd.DataFrame, metric: str) -> Figure:
    """Estimated marginal means vs frozen layers, one line per train size, with their 95% intervals."""
    plt = _plt()
    order = frozen_order(emmeans["frozen_layers"])
    fig, ax = plt.subplots(figsize=(WIDTH, 3.4), constrained_layout=True)
    _by_size_lines(ax, emmeans, "emmean", "ci_low", "ci_high", order)
    ax.set_ylabel(f"estimated mean {metric}")
    ax.legend(title="train size", loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return fig


def forest_plot(contrasts: pd.DataFrame, margin: float | None = None) -> Figure:
    """Each frozen level minus full fine-tuning, per train size: estimate and interval in points.

    The intervals are the adjusted ones (``ci_*_adj``), so that an interval clear of zero and a filled
    marker (adjusted p below 0.05) tell the same story. The equivalence margin, when the analysis used
    one, is drawn as dotted lines.
    """
    plt = _plt()
    low, high = ("ci_low_adj", "ci_high_adj") if "ci_low_adj" in contrasts.columns else ("ci_low", "ci_high")
    frame = contrasts.copy()
    order = frozen_order(frame["frozen_layers"])
    frame["depth"] = frame["frozen_layers"].map({k: i for i, k in enumerate(order)})
    frame = frame.sort_values(["train_size", "depth"], ascending=[True, True]).reset_index(drop=True)
    sizes = sorted(int(s) for s in frame["train_size"].unique())
    colors = _size_colors(sizes)
    height = max(2.5, 0.2 * len(frame) + 0.35 * len(sizes) + 0.8)
    fig, ax = plt.subplots(figsize=(WIDTH, height), constrained_layout=True)
    y, ticks, labels = 0.0, [], []
    for size in sizes:
        part = frame[frame["train_size"] == size]
        for row in part.itertuples():
            significant = bool(row.p_adj < 0.05)
            ax.plot([100 * getattr(row, low), 100 * getattr(row, high)], [y, y], color=colors[size], lw=1.4)
            ax.plot(
                100 * row.estimate,
                y,
                marker="o",
                ms=5,
                color=colors[size],
                markerfacecolor=colors[size] if significant else "white",
            )
            ticks.append(y)
            labels.append(f"n={size}, frozen {frozen_label(row.frozen_layers)}")
            y -= 1
        y -= 0.6
    ax.axvline(0, color="black", lw=0.8)
    if margin:
        for side in (-1, 1):
            ax.axvline(100 * side * margin, color="#7f7f7f", ls=":", lw=1)
    ax.set_yticks(ticks, labels)
    ax.set_xlabel("difference from full fine-tuning (points)")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _by_size_lines(
    ax: Axes, table: pd.DataFrame, value: str, low: str, high: str, order: list[int], scale: float = 1.0
) -> None:
    sizes = sorted(int(s) for s in table["train_size"].unique())
    colors = _size_colors(sizes)
    position = {k: i for i, k in enumerate(order)}
    width = 0.6
    for j, size in enumerate(sizes):
        part = table[table["train_size"] == size].copy()
        part["pos"] = part["frozen_layers"].map(position) + (j - (len(sizes) - 1) / 2) * width / max(len(sizes), 1)
        part = part.sort_values("pos")
        v = part[value].to_numpy(float) * scale
        lo = np.clip(v - part[low].to_numpy(float) * scale, 0, None)
        hi = np.clip(part[high].to_numpy(float) * scale - v, 0, None)
        ax.errorbar(
            part["pos"], v, yerr=[lo, hi], color=colors[size], marker="o", ms=4, capsize=2, lw=1.2, label=f"n={size}"
        )
    _frozen_axis(ax, order)
    ax.grid(axis="y", alpha=0.3)


def spread_figure(spread: pd.DataFrame, metric: str) -> Figure:
    """Seed standard deviation per cell with its chi-square 95% interval, one line per train size."""
    plt = _plt()
    order = frozen_order(spread["frozen_layers"])
    fig, ax = plt.subplots(figsize=(WIDTH, 3.0), constrained_layout=True)
    _by_size_lines(ax, spread.dropna(subset=["std"]), "std", "ci_low", "ci_high", order, scale=100)
    ax.set_ylabel(f"SD of {metric} over seeds (points)")
    ax.legend(title="train size", loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return fig


def failure_figure(rates: pd.DataFrame) -> Figure:
    """Share of failed (collapsed) runs per cell with its Wilson 95% interval."""
    plt = _plt()
    order = frozen_order(rates["frozen_layers"])
    fig, ax = plt.subplots(figsize=(WIDTH, 3.0), constrained_layout=True)
    _by_size_lines(ax, rates, "rate", "ci_low", "ci_high", order)
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("failure rate")
    ax.legend(title="train size", loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return fig


def lee_figure(relative: pd.DataFrame, operating: pd.DataFrame, threshold: float = 0.9) -> Figure:
    """Lee et al.'s view: quality relative to full fine-tuning vs number of trainable layers.

    Intervals are the analysis' bootstrap intervals; the threshold (90% by default) is dashed, and the
    operating point of each size (fewest trainable layers reaching it) is a star.
    """
    plt = _plt()
    sizes = sorted(int(s) for s in relative["train_size"].unique())
    colors = _size_colors(sizes)
    fig, ax = plt.subplots(figsize=(WIDTH, 3.2), constrained_layout=True)
    for size in sizes:
        part = relative[relative["train_size"] == size].sort_values("trainable_layers")
        v = part["relative"].to_numpy(float)
        lo = np.clip(v - part["relative_ci_low"].to_numpy(float), 0, None)
        hi = np.clip(part["relative_ci_high"].to_numpy(float) - v, 0, None)
        ax.errorbar(
            part["trainable_layers"],
            v,
            yerr=[lo, hi],
            color=colors[size],
            marker="o",
            ms=4,
            capsize=2,
            label=f"n={size}",
        )
        op = operating[operating["train_size"] == size]
        if len(op) and pd.notna(op["trainable_layers"].iloc[0]):
            k = float(op["trainable_layers"].iloc[0])
            hit = part[part["trainable_layers"] == k]
            if len(hit):
                ax.plot(k, float(hit["relative"].iloc[0]), marker="*", ms=13, color=colors[size], mec="black", mew=0.6)
    ax.axhline(threshold, color="#7f7f7f", ls="--", lw=1, label=f"{threshold:.0%} of full")
    ax.axhline(1.0, color="black", lw=0.6)
    ax.set_xlabel("trainable encoder layers")
    ax.set_ylabel("mean score ÷ full fine-tuning's")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return fig


def compute_figure(runs: pd.DataFrame, response: str, metric: str) -> Figure:
    """Cost of each frozen level: wall time and trainable parameters per run, and the metric against time."""
    plt = _plt()
    order = frozen_order(runs["frozen_layers"])
    position = {k: i for i, k in enumerate(order)}
    sizes = sorted(int(s) for s in runs["train_size"].unique())
    colors = _size_colors(sizes)
    fig, axes = plt.subplots(1, 3, figsize=(WIDTH, 2.7), constrained_layout=True)
    rng = np.random.default_rng(1)
    for size in sizes:
        part = runs[runs["train_size"] == size]
        x = part["frozen_layers"].map(position).to_numpy(float) + rng.uniform(-0.15, 0.15, len(part))
        axes[0].scatter(x, part["wall_seconds"], s=10, color=colors[size], alpha=0.8, label=f"n={size}")
        axes[2].scatter(part["wall_seconds"], part[response], s=10, color=colors[size], alpha=0.8)
    params = runs.groupby("frozen_layers")["trainable_params"].median().reindex(order)
    axes[1].bar(range(len(order)), params.to_numpy(float) / 1e6, color="#3b6ea5")
    _frozen_axis(axes[0], order)
    _frozen_axis(axes[1], order)
    axes[0].set_ylabel("wall time per run (s)")
    axes[1].set_ylabel("trainable parameters (M)")
    axes[2].set_xlabel("wall time per run (s)")
    axes[2].set_ylabel(f"{metric} ({response})")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(sizes), frameon=False)
    return fig


def reference_figure(comparison: pd.DataFrame, metric: str, reference_name: str) -> Figure:
    """The same figure twice: our cell means and the published ones, vs frozen layers, one line per size."""
    plt = _plt()
    both = comparison[comparison["in_reference"]]
    order = frozen_order(both["frozen_layers"])
    position = {k: i for i, k in enumerate(order)}
    sizes = sorted(int(s) for s in both["train_size"].unique())
    colors = _size_colors(sizes)
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, 3.0), sharey=True, constrained_layout=True)
    panels = (("mean", "std", "this study"), ("ref_mean", "ref_std", reference_name))
    for ax, (column, spread, title) in zip(axes, panels, strict=True):
        for size in sizes:
            part = both[both["train_size"] == size].copy()
            part["pos"] = part["frozen_layers"].map(position)
            part = part.sort_values("pos")
            ax.errorbar(
                part["pos"], part[column], yerr=part[spread], color=colors[size], marker="o", ms=4, capsize=2,
                label=f"n={size}",
            )  # fmt: skip
        ax.set_title(title)
        _frozen_axis(ax, order)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(f"mean {metric} ± SD")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(sizes), frameon=False)
    return fig
