"""The numbers in this folder's README, computed from the committed files by today's analysis.

The README's findings section is this script's output, pasted between two markers, so a change in the
statistics or the data that moves a published number is caught: ``tests/test_example_blog2020.py`` runs
:func:`findings_markdown` and compares it with the README. After a change, regenerate and read the diff:

    python examples/blog2020-minilm/findings.py --write     # rewrite the README section
    python examples/blog2020-minilm/findings.py --check     # exit 1 if the README is out of date

Inputs: ``results.csv`` and ``predictions.parquet`` (the 350-run study, ``freezestats export``), the blog's
appendix (``data/reference/``), and the CPU replication's database in ``cpu-2core/`` (same spec on a 2-core
CPU, in progress) for the paired hardware check.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from freezestats.analysis.pipeline import Analysis, analyze
from freezestats.results.item_predictions import read_item_predictions
from freezestats.stats.descriptive.reference import compare_with_reference

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import readme_findings  # noqa: E402  (examples/readme_findings.py: the README section's markers, --write, --check)

START, END = readme_findings.START, readme_findings.END
README = HERE / "README.md"
# MiniLM-L6 has 6 layers, RoBERTa-base 12: the same *fraction* of the encoder frozen is k of 6 against 2k of 12.
DEPTH_MATCH = {-1: -1, 0: 0, 1: 2, 2: 4, 4: 8, 5: 10, 6: 12}
SST2_LEVELS = [-1, 1, 2, 4, 5, 6]


def load_inputs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The committed export: one row per run, and the per-item predictions of every run."""
    return pd.read_csv(HERE / "results.csv"), read_item_predictions(HERE / "predictions.parquet")


#: Each task on its own metric: CoLA by Matthews correlation (GLUE's), re-scored from the stored predictions;
#: its runs chose their checkpoints on accuracy (the blog's protocol), so it is scored at the last checkpoint.
TASK_METRICS = {"cola": "mcc"}


def run_analysis(results: pd.DataFrame, items: pd.DataFrame, uncertainty: str = "task") -> Analysis:
    """``freezestats analyze --model mixed --predictions predictions.parquet --task-metric cola=mcc`` with every
    other default (or, to say what changed, with ``--uncertainty seeds``: the answer about this dev set only)."""
    return analyze(results, items=items, uncertainty=uncertainty, task_metrics=TASK_METRICS)


def pts(value: float) -> str:
    """A difference or score in accuracy points, one decimal, with a real minus sign."""
    return f"{100 * value:+.1f}".replace("-", "−")


def interval(low: float, high: float) -> str:
    return f"[{pts(low)}, {pts(high)}]"


def answer_section(analysis: Analysis, seed_only: Analysis) -> list[str]:
    answer = analysis.tables["answer"]
    was = seed_only.tables["answer"].set_index(["task", "train_size"])["statement"]
    lines = readme_findings.table_head(
        "**The answer, per task and train size** (SST-2: held-out accuracy, margin 1 point; CoLA: MCC at the last "
        "checkpoint, margin 2 points; non-inferiority for the task, i.e. new seeds and new dev-set items: each "
        "depth's contrast paired by seed and by item; "
        "graphical procedure over every size and depth of the task, familywise 5%). Where it changed, the "
        "answer with seed-only intervals (the mixed model's fixed sequence per size, about this dev set only):",
        ["task", "n", "answer", "was, with seed-only intervals"],
        "lrll",
    )
    for row in answer.sort_values(["task", "train_size"]).itertuples():
        before = was.get((row.task, row.train_size), "")
        lines.append(
            f"| {row.task} | {row.train_size} | {row.statement} | {'' if before == row.statement else before} |"
        )
    return lines


def contrast_section(analysis: Analysis) -> list[str]:
    c = analysis.tables["contrasts"]
    c = c[(c["fit"] == "all_runs") & (c["task"] == "sst2")]
    lines = readme_findings.table_head(
        "**SST-2, each frozen depth minus full fine-tuning (frozen 0)**, held-out accuracy in points, "
        "estimate [95% interval, Holm-adjusted within a size]:",
        ["n", *(f"frozen {k}" for k in SST2_LEVELS)],
        "r" + "l" * len(SST2_LEVELS),
    )
    for size, at in c.groupby("train_size"):
        at = at.set_index("frozen_layers")
        cells = [
            f"{pts(at.at[k, 'estimate'])} {interval(at.at[k, 'ci_low_adj'], at.at[k, 'ci_high_adj'])}"
            for k in SST2_LEVELS
        ]
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    return lines


_RULE_WORDS = {"binomial": "binomial test against the majority rate", "dominant_class": "one class >= 95%"}


def failure_section(analysis: Analysis) -> list[str]:
    f = analysis.tables["failure_rates"]
    rules = analysis.settings["failure_rule"]
    levels = sorted(f["frozen_layers"].unique())
    judged = "; ".join(
        f"{task}: {_RULE_WORDS.get(r['rule'], r['rule'])} at the {r['checkpoint']} checkpoint"
        for task, r in sorted(rules.items())
    )
    lines = readme_findings.table_head(
        f"**Failed runs**, failed of 5 seeds, judged where each task is analysed ({judged}):",
        ["task", "n", *levels],
        "lr" + "r" * len(levels),
    )
    for (task, size), at in f.groupby(["task", "train_size"]):
        at = at.set_index("frozen_layers")
        lines.append(f"| {task} | {size} | " + " | ".join(str(int(at.at[k, "n_failed"])) for k in levels) + " |")
    return lines


def cola_section(analysis: Analysis) -> list[str]:
    """CoLA on its own metric: each cell's mean MCC at the last checkpoint, and the task-level contrasts."""
    cells = analysis.tables["cell_summary"]
    cells = cells[cells["task"] == "cola"]
    levels = sorted(cells["frozen_layers"].unique())
    lines = readme_findings.table_head(
        "**CoLA on MCC** (its GLUE metric; last checkpoint), mean over 5 seeds, in MCC points (×100):",
        ["n", *(f"frozen {k}" for k in levels)],
        "r" + "r" * len(levels),
    )
    for size, at in cells.groupby("train_size"):
        at = at.set_index("frozen_layers")
        lines.append(f"| {size} | " + " | ".join(f"{100 * at.at[k, 'mean']:.1f}" for k in levels) + " |")
    t = analysis.tables["noninferiority"]
    t = t[(t["task"] == "cola") & (t["train_size"] == 1000)]
    lines += [
        "",
        "CoLA at n = 1000, frozen − full in MCC points, 95% interval for the task: "
        + "; ".join(
            f"{row.frozen_layers}: {pts(row.estimate)} {interval(row.ci_low, row.ci_high)}" for row in t.itertuples()
        )
        + ".",
    ]
    return lines


def reference_section(results: pd.DataFrame) -> list[str]:
    """Ours beside the blog's, on the blog's statistic (best_dev), depth matched by fraction of the encoder."""
    ours = results[results["role"] == "grid"].copy()
    ours["frozen_layers"] = ours["frozen_layers"].map(DEPTH_MATCH)
    table = compare_with_reference(ours, response="best_dev")
    lines = readme_findings.table_head(
        "**Beside the blog's appendix** (RoBERTa-base; its statistic, best_dev; depth matched by fraction: "
        "MiniLM frozen k of 6 against RoBERTa 2k of 12). Mean over 5 seeds, ours − blog with a Welch 95% "
        "interval:",
        ["task", "n", "frozen (of 6 / of 12)", "MiniLM", "RoBERTa", "difference"],
        "lrlrrl",
    )
    inverse = {v: k for k, v in DEPTH_MATCH.items()}
    for row in table[table["in_reference"]].itertuples():
        if row.frozen_layers not in (-1, 0, 4, 8, 12):
            continue
        depth = f"{inverse[row.frozen_layers]} / {row.frozen_layers}"
        diff = (
            f"{pts(row.difference)} {interval(row.ci_low, row.ci_high)}"
            if np.isfinite(row.ci_low)
            else (f"{pts(row.difference)} (no spread on either side)")
        )
        lines.append(
            f"| {row.task} | {row.train_size} | {depth} | {100 * row.mean:.1f} | {100 * row.ref_mean:.1f} | {diff} |"
        )
    return lines


def spread_section(results: pd.DataFrame) -> list[str]:
    """Seed SD of best_dev per size (median over the shallow cells), ours against the blog's."""
    ours = results[
        (results["role"] == "grid") & (results["task"] == "sst2") & results["frozen_layers"].isin([-1, 0, 1, 2])
    ]
    sd = ours.groupby(["train_size", "frozen_layers"])["best_dev"].std().groupby("train_size").median()
    ref = pd.read_csv(HERE.parents[1] / "data" / "reference" / "blog2020_roberta_base.csv")
    ref = ref[(ref["task"] == "sst2") & ref["frozen_layers"].isin([-1, 0, 2, 4])]
    ref_sd = ref.groupby("train_size")["std"].median()
    lines = readme_findings.table_head(
        "**Seed spread, SST-2** (SD of best_dev over 5 seeds, median over the shallow depths: MiniLM −1/0/1/2, "
        "RoBERTa −1/0/2/4), in points:",
        ["n", "MiniLM", "RoBERTa"],
        "rrr",
    )
    for size in sd.index:
        lines.append(f"| {size} | {100 * sd[size]:.2f} | {100 * ref_sd[size]:.2f} |")
    return lines


def items_section(analysis: Analysis) -> list[str]:
    t = analysis.tables["noninferiority"]
    t = t[(t["task"] == "sst2") & (t["train_size"] == 1000)]
    lines = readme_findings.table_head(
        "**One dev set for every run** (SST-2, n = 1000): frozen − full in points, its standard error from the "
        "seeds and from the dev-set items (436 scored), the items' share of the variance, the 95% interval for "
        "the task, and the answer's one-sided bound (at the level the graphical procedure gave the test; margin "
        "−1.0):",
        ["frozen", "estimate", "se seeds", "se items", "items' share", "95% interval (task)", "bound", "non-inferior"],
        "rrrrrlrl",
    )
    for row in t.itertuples():
        lines.append(
            f"| {row.frozen_layers} | {pts(row.estimate)} | {100 * row.se_seed:.2f} | {100 * row.se_item:.2f} "
            f"| {100 * row.se_item**2 / row.se**2:.0f}% | {interval(row.ci_low, row.ci_high)} | {pts(row.lower)} "
            f"| {'yes' if row.noninferior else 'no'} |"
        )
    return lines


def power_section(analysis: Analysis) -> list[str]:
    per_size = analysis.settings["seeds_per_size"]
    lines = readme_findings.table_head(
        "**Seeds per cell for 80% power** (detect a 2-point loss / show non-inferiority within 1 point; "
        "Holm within a size; from the fitted variances):",
        ["task", *(f"n = {n}" for n in per_size["sst2"])],
        "l" * (1 + len(per_size["sst2"])),
    )
    for task, sizes in sorted(per_size.items()):
        cells = [f"{v['detect_delta'] or '>20'} / {v['noninferior'] or '>20'}" for v in sizes.values()]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return [*lines, "", *task_power_section(analysis)]


def task_power_section(analysis: Analysis) -> list[str]:
    """Seeds per cell for the default (task-level) answer, per depth: simulated from each depth's own contrast,
    the SDs' uncertainty included (settings["seeds_needed"])."""
    needed = analysis.settings.get("seeds_needed", {})
    if not needed:
        return []
    sizes = list(next(iter(needed.values())))
    lines = readme_findings.table_head(
        "**Seeds per cell for 80% power of the answer for the task** (show a depth with no true cost non-inferior "
        "at the margin, at the level the graphical procedure first gives it; simulated from each depth's own "
        "per-seed spread with that spread's uncertainty, its dev-set items' part and its failure part; >40: not "
        "within 40 seeds, mostly because more seeds do not shrink the items' part):",
        ["task", "frozen", *(f"n = {n}" for n in sizes)],
        "ll" + "r" * len(sizes),
    )
    for task, by_size in sorted(needed.items()):
        depths = sorted({int(d) for row in by_size.values() for d in row})
        for depth in depths:
            cells = [str(by_size.get(n, {}).get(str(depth)) or ">40") for n in sizes]
            lines.append(f"| {task} | {depth} | " + " | ".join(cells) + " |")
    return lines


def cpu_runs() -> pd.DataFrame:
    """The CPU replication's completed runs (a copy of its database: the export must not touch the original)."""
    from freezestats.results.export import export_results

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "study.db"
        with sqlite3.connect(HERE / "cpu-2core" / "study.db") as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        return export_results(f"sqlite:///{copy}", Path(tmp) / "results.csv")


def hardware_section(results: pd.DataFrame, cpu: pd.DataFrame) -> list[str]:
    """Paired by (task, size, depth, seed): H100 minus the 2-core CPU, same spec and precision (bf16)."""
    key = ["task", "train_size", "frozen_layers", "seed"]
    cpu = cpu[cpu["role"] == "grid"]  # the export holds completed trials only
    pairs = results.merge(cpu, on=key, suffixes=("_gpu", "_cpu"))
    diff = pairs["best_dev_gpu"] - pairs["best_dev_cpu"]
    n = len(diff)
    half = stats.t.ppf(0.975, n - 1) * diff.std(ddof=1) / np.sqrt(n)
    seed_sd = pairs.groupby(["task", "train_size", "frozen_layers"])["best_dev_gpu"].std().median()
    return [
        f"**Same spec, other hardware.** {n} runs of the CPU replication (`cpu-2core/`, 2-core AMD EPYC, bf16 "
        f"autocast) pair with the H100 runs by task, size, depth and seed (best_dev): H100 − CPU = "
        f"{pts(diff.mean())} points [{pts(diff.mean() - half)}, {pts(diff.mean() + half)}], SD of the "
        f"differences {100 * diff.std(ddof=1):.2f} points against a median seed SD of {100 * seed_sd:.2f} "
        f"points in those cells; {int((diff.abs() < 1e-9).sum())} of {n} pairs are identical."
    ]


def findings_markdown(analysis: Analysis | None = None) -> str:
    """The README's findings section; ``analysis`` is :func:`run_analysis` of the committed export when a caller
    (the tests) already has it."""
    results, items = load_inputs()
    analysis = analysis if analysis is not None else run_analysis(results, items)
    sections = [
        answer_section(analysis, run_analysis(results, items, uncertainty="seeds")),
        contrast_section(analysis),
        failure_section(analysis),
        cola_section(analysis),
        reference_section(results),
        spread_section(results),
        items_section(analysis),
        power_section(analysis),
        hardware_section(results, cpu_runs()),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


if __name__ == "__main__":
    sys.exit(readme_findings.main(README, findings_markdown, __doc__.splitlines()[0]))
