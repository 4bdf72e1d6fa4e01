"""The saved record of ``bench/coverage_task_level.py``: per-contrast summary, chunks merged, the printed table.

Kept apart from the bench's simulation (``coverage_task_level.py``: one study, the pool, the command line) because
reading, merging and printing records is its own job, and ``--combine`` and ``--from-json`` use it without
simulating anything. Loaded by path, like ``coverage.py`` (see there).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

# bench/coverage.py, for the saved record every coverage bench shares; loaded by path, since `import coverage`
# would find coverage.py (the PyPI package of pytest-cov) first wherever that is installed
_spec = importlib.util.spec_from_file_location("bench_coverage", Path(__file__).resolve().with_name("coverage.py"))
coverage = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(coverage)  # type: ignore[union-attr]

COVERAGES = ("task", "task_delta", "seed_task", "seed_items", "model_task", "model_items")
LABELS = {"task": "task", "task_delta": "delta", "seed_task": "seed>task", "seed_items": "seed>items",
          "model_task": "model>task", "model_items": "model>items", "two_part": "two-part", "se_sd": "se/sd",
          "width_sd": "width/sd", "miss_lower": "miss<", "miss_upper": "miss>"}  # fmt: skip


def record(alt: pd.DataFrame, null: pd.DataFrame, started: float, errors: dict, settings: dict, **extra) -> dict:
    """The saved record of these studies' rows: per-contrast summary and the familywise error under the null."""
    n_studies = int(alt["study"].nunique())
    depths = depth_coverage(alt)
    return coverage.result_record(n_studies, started, errors, summarise(alt, null), fwer=familywise_error(null),
                                  depths=depths, **settings, **extra)  # fmt: skip


def familywise_error(null: pd.DataFrame) -> dict[str, float]:
    """The share of null studies naming any depth non-inferior: at any size (``any``) and per size."""
    shown = null.groupby(["study", "train_size"])["noninferior"].any().unstack()
    return {"any": float(shown.any(axis=1).mean()), **{str(n): float(shown[n].mean()) for n in shown.columns}}


def depth_coverage(alt: pd.DataFrame) -> list[dict]:
    """Per depth: the task-level coverage over its sizes, with a 95% interval over studies.

    Why: a cell's own coverage has an MC SE of 0.008 at 720 studies, so a depth whose every cell covers 0.975
    is not shown above the band cell by cell (Holm over 30). A study's share of a depth's contrasts covered is
    one number per study, and studies are independent, so the t interval over studies says whether the depth
    as a whole covers above 97% or below 93%. It does not replace the cells (a depth can be too wide at one
    size and too short at another), it gives the cells' common direction the power they lack alone."""
    per_study = alt.groupby(["frozen_layers", "study"])["task"].mean()
    sizes = alt.groupby("frozen_layers")["train_size"].nunique()
    rows = []
    for depth, shares in per_study.groupby(level="frozen_layers"):
        values = shares.to_numpy(dtype=float)
        mean, half = values.mean(), stats.t.ppf(0.975, len(values) - 1) * stats.sem(values)
        rows.append({"frozen_layers": int(depth), "cells": int(sizes[depth]), "task": float(mean),
                     "low": float(mean - half), "high": float(mean + half)})  # fmt: skip
    return rows


class Switch(NamedTuple):
    """One setting of the analysis an experiment may change (``coverage_task_level.Experiment``): where the analysis
    reads it, how the command line gives it, and how a record names it. One table, so that a new switch is one row
    and not five edits (the bench's class, its ``apply`` and ``settings``, the merge check, the argument parser)."""

    home: str  # "module:ATTRIBUTE", the module-level setting every process of the bench sets
    parse: str  # "grid" or "scale": how ``--flag`` is read
    default: object  # what a record without it ran with (older records predate the switch); None: the analysis's
    label: str  # the record header's words where the run changed it ({} is the value)
    help: str


#: the analysis's failure-part options an experiment can switch, in the order the record header names them
SWITCHES: dict[str, Switch] = {
    "sd_grid": Switch("freezestats.stats.failures.sd_integration:SD_GRID", "grid", None, "SD grid {}",
                      "an experiment: the level x size SDs the joint draws integrate over, e.g. 0.1,0.25,0.5,1,2,3"),
    "level_sd": Switch("freezestats.stats.items.task_two_part:PAIR_LEVEL_SD", "scale", 2.5, "pair level SD {}",
                       "an experiment: the SD of the depth's and the reference's effects in the pair's failure model"),
    "cell_prior_scale": Switch("freezestats.stats.failures.sd_integration:PRIOR_SCALE", "scale", 1.0,
                               "cell SD prior scale {}",
                               "an experiment: the half-normal prior scale of the level x size SD"),
}  # fmt: skip
#: the settings chunks must share to be merged into one record
SETTINGS = ("seeds", "margin", "collapse_scale", "seed_shared_collapse", "depth_collapse", "failure_rates", *SWITCHES)


def switch_labels(record: dict) -> str:
    """The header's words for the switches a run changed from what a record without them ran with."""
    changed = [(s, _setting(record, name)) for name, s in SWITCHES.items()]
    return "".join(f", {s.label.format(value)}" for s, value in changed if value not in (None, s.default))


def _setting(record: dict, name: str) -> object:
    """A record's setting, or what a record without it ran with."""
    return record.get(name, SWITCHES[name].default if name in SWITCHES else None)


def combine(records: list[dict], studies: list[pd.DataFrame]) -> dict:
    """One record from several chunks' saved records and study rows (``--combine``): the chunks must share their
    settings and hold disjoint studies; the time is the chunks' sum. Why: a run of 800 studies takes longer than a
    working session on two cores, and chunks of a few hundred each can be run, committed and merged exactly."""
    for chunk in records[1:]:
        differ = [k for k in SETTINGS if _setting(chunk, k) != _setting(records[0], k)]
        if differ:
            raise SystemExit(f"error: the chunks differ in {', '.join(differ)}: they cannot be merged")
    rows = pd.concat(studies, ignore_index=True)
    alt, null = rows[rows["kind"] == "alternative"], rows[rows["kind"] == "null"]
    if alt.duplicated(["study", "train_size", "frozen_layers"]).any():
        raise SystemExit("error: the chunks share studies: each study may be counted once")
    errors: dict[str, int] = {}
    for chunk in records:
        for name, count in chunk["errors"].items():
            errors[name] = errors.get(name, 0) + count
    settings = {k: _setting(records[0], k) for k in SETTINGS} | {"processes": records[0]["processes"]}
    merged = record(alt, null, time.perf_counter(), errors, settings, chunks=[r.get("studies") for r in records])
    merged["seconds"] = sum(r["seconds"] for r in records)
    merged["machine"] = "; ".join(dict.fromkeys(r["machine"] for r in records))
    return merged


def summarise(alt: pd.DataFrame, null: pd.DataFrame) -> list[dict]:
    """Per contrast: its truths, each interval's coverage, the task-level coverage with and without a collapsed
    run among its runs, the share of studies showing it non-inferior, and the share of null studies that do
    (all of them, and those without a collapsed run in the contrast)."""
    cell = alt.groupby(["train_size", "frozen_layers"])
    out = cell.agg(truth_task=("truth_task", "mean"), n=("study", "size"), collapse=("collapse", "mean"),
                   power=("noninferior", "mean"), two_part=("two_part", "mean"))  # fmt: skip
    for name in COVERAGES:
        out[name] = cell[name].mean() if name in alt else np.nan
    if "error" in alt:  # how wide the intervals are against the estimate's own spread over studies
        spread = cell["error"].std()
        out["se_sd"] = cell["se"].mean() / spread
        # at most 2, an accuracy contrast's range: task_level_contrasts keeps intervals within it since stop 50,
        # and before, a df near 0 made a few 1e149 wide (4 of the seed-shared default's 43,200 rows above 2)
        width = alt["width"].clip(upper=2.0).groupby([alt["train_size"], alt["frozen_layers"]])
        out["width_sd"] = width.mean() / (2 * stats.norm.ppf(0.975) * spread)
        # Which side missed: an interval that misses with its estimate above the truth missed on its lower side,
        # the side a non-inferiority test reads. Each side of a 95% interval should miss 2.5%; a cell that covers
        # too often on both sides is too wide, one that misses on one side only is shifted.
        missed = ~alt["task"].astype(bool)
        keys = [alt["train_size"], alt["frozen_layers"]]
        out["miss_lower"] = (missed & (alt["error"] > 0)).groupby(keys).mean()
        out["miss_upper"] = (missed & (alt["error"] < 0)).groupby(keys).mean()
    split = alt.groupby(["train_size", "frozen_layers", "collapse"])["task"].mean().unstack()
    out["task_collapse"] = split.get(True)
    out["task_none"] = split.get(False)
    out["null"] = null.groupby(["train_size", "frozen_layers"])["noninferior"].mean()
    out["null_none"] = null[~null["collapse"]].groupby(["train_size", "frozen_layers"])["noninferior"].mean()
    return [{k: (None if pd.isna(v) else v) for k, v in row.items()} for row in out.reset_index().to_dict("records")]


def _factor_labels(result: dict) -> str:
    """The depths whose collapse factor a run set (``--depth-collapse``), as the header names them."""
    factors = result.get("depth_collapse") or {}
    return "".join(f", frozen {depth} collapsing x{factor:g} the reference's" for depth, factor in factors.items())


def report(result: dict, baseline: dict | None = None) -> str:
    """The coverage table, familywise error and cells outside the Monte Carlo band; with ``baseline`` (a saved
    run) its task-level coverage and power beside each cell (``base``, ``base_pow``) and its error below."""
    rows = pd.DataFrame(result["rows"])
    band = 1.96 * np.sqrt(0.95 * 0.05 / result["n_studies"])
    lines = [
        f"bench/coverage_task_level.py: {result['n_studies']} studies of blog_shaped(), {result['seeds']} seeds a "
        f"cell, collapse rates x{result.get('collapse_scale', 1.0):g}"
        f"{', collapses shared by seed' if result.get('seed_shared_collapse') else ''}{_factor_labels(result)}, "
        f"margin {result['margin']}, "
        f"failure rates {result.get('failure_rates', 'pooled')}{switch_labels(result)}"
        f", {result['processes']} process(es), "
        f"{result['seconds']:.0f} s",
        f"  {result['machine']}; fits that raised: {result['errors'] or 'none'}"
        + (f"; merged from chunks of studies {result['chunks']}" if result.get("chunks") else ""),
        f"\ncoverage of two-sided 95% per-comparison intervals (MC band 0.95 +-{band:.3f}); power = share of studies"
        " showing the depth non-inferior; collapse = share of studies with a collapsed run in the contrast; null ="
        " share of studies at the margin showing it non-inferior (null|none: of those without a collapsed run)",
    ]
    names = [*COVERAGES, "task_collapse", "task_none", "collapse", "two_part", "power", "null", "null_none"]
    names += [c for c in ("se_sd", "width_sd", "miss_lower", "miss_upper") if c in rows]
    if baseline is not None:
        lines.append(
            f"base, base_pow: the task-level coverage and power of {baseline['n_studies']} studies with failure rates "
            f"{baseline.get('failure_rates', 'pooled')} (the saved baseline run)"
        )
        base = pd.DataFrame(baseline["rows"]).set_index(["train_size", "frozen_layers"])
        keys = pd.MultiIndex.from_frame(rows[["train_size", "frozen_layers"]])
        rows["base"] = base["task"].reindex(keys).to_numpy()
        rows["base_pow"] = base["power"].reindex(keys).to_numpy()
        names = ["task", "base", "power", "base_pow", *[c for c in names if c not in ("task", "power")]]
    header = ["n", "depth", "truth", *[LABELS.get(c, c.replace("_", "|")) for c in names]]
    widths = [max(len(h), 7) for h in header]
    lines.append("  ".join(f"{h:>{w}}" for h, w in zip(header, widths, strict=True)))
    for row in rows.sort_values(["train_size", "frozen_layers"]).to_dict("records"):
        cells = ["-" if row.get(c) is None or pd.isna(row.get(c)) else f"{row[c]:.3f}" for c in names]
        values = [row["train_size"], row["frozen_layers"], f"{row['truth_task']:+.4f}", *cells]
        lines.append("  ".join(f"{v:>{w}}" for v, w in zip(values, widths, strict=True)))
    fwer = result["fwer"]
    per_size = ", ".join(f"n={n}: {v:.3f}" for n, v in fwer.items() if n != "any")
    lines.append(f"\nfamilywise error under null_at_margin({result['margin']}): {fwer['any']:.3f} (nominal <= 0.05)")
    lines.append(f"  per size (any depth at that size shown non-inferior): {per_size}")
    if baseline is not None:
        lines.append(f"  baseline: {baseline['fwer']['any']:.3f}")
    low, high = 0.95 - band, 0.95 + band
    for name in [c for c in ("task", "task_delta", "base", "seed_task", "model_task") if c in rows]:
        out = rows[(rows[name] < low) | (rows[name] > high)]
        cells = ", ".join(f"({r.train_size}, {r.frozen_layers}) {getattr(r, name):.3f}" for r in out.itertuples())
        lines.append(
            f"{LABELS.get(name, name):>11} outside {low:.3f}-{high:.3f}: {len(out)} of {len(rows)}: {cells or '-'}"
        )
    lines.append(band_departures(rows["task"].to_numpy(), result["n_studies"], rows))
    if result.get("depths"):
        lines.append("\nper depth, over its sizes: task-level coverage, 95% t interval over the (independent) studies")
        lines += [f"  frozen {d['frozen_layers']:>2} ({d['cells']} sizes): {d['task']:.3f} [{d['low']:.3f}, "
                  f"{d['high']:.3f}]{_versus_band(d)}" for d in result["depths"]]  # fmt: skip
    return "\n".join(lines)


def _versus_band(depth: dict, band: tuple[float, float] = (0.93, 0.97)) -> str:
    """Where a depth's interval lies against the issue's band: shown above it, below it, or not shown outside."""
    if depth["low"] > band[1]:
        return "  above the band (too wide)"
    if depth["high"] < band[0]:
        return "  below the band (too short)"
    return ""


def band_departures(covered: np.ndarray, n: int, rows: pd.DataFrame, band: tuple[float, float] = (0.93, 0.97)) -> str:
    """Which cells' coverage is shown outside the issue's 93-97% band, not merely seen outside it.

    Why: with 30 cells and 400 studies each point estimate has an MC SE of 0.011, so a method whose every cell
    truly covers 95% puts some cell outside 0.929-0.971 in about 4 benches of 5 (0.946^30 = 0.19). Each cell here
    gets the exact one-sided binomial test against the band's nearer edge (above 0.97 or below 0.93), and Holm's
    step-down over the cells (statsmodels ``multipletests``) controls the chance of naming any cell wrongly."""
    counts = np.round(np.asarray(covered, dtype=float) * n).astype(int)
    above = stats.binom.sf(counts - 1, n, band[1])  # P(X >= k) at the upper edge
    below = stats.binom.cdf(counts, n, band[0])  # P(X <= k) at the lower edge
    p = np.minimum(np.minimum(above, below) * 2, 1.0)  # two one-sided tests, one per edge: Bonferroni over the two
    shown = multipletests(p, alpha=0.05, method="holm")[0]
    named = ", ".join(f"({r.train_size}, {r.frozen_layers}) {c:.3f}"
                      for r, c, s in zip(rows.itertuples(), covered, shown, strict=True) if s)  # fmt: skip
    head = f"       task shown outside {band[0]:.2f}-{band[1]:.2f} (exact binomial per cell, Holm over {len(p)} cells"
    tail = f"unadjusted p < 0.05: {(p < 0.05).sum()}"
    return f"{head}, familywise 0.05): {int(shown.sum())} of {len(p)}: {named or '-'}; {tail}"
