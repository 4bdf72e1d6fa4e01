"""The numbers in this folder's README, computed from the committed study by today's analysis.

The README's findings section is this script's output between two markers (``examples/readme_findings.py``);
``tests/test_example_multitask.py`` recomputes it and compares, so a change in the statistics that moves a
published number fails until the section is regenerated (``--write``) and the diff read.

Input: ``study.db`` (the 90-trial study of ``study/multitask-minilm.toml``), analysed with every default of
``freezestats analyze`` (mixed model of ``heldout``). Each task keeps its own metric (SST-2 accuracy, MRPC F1,
STS-B Pearson), shown in points (x 100); no table pools two tasks.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

import pandas as pd

from freezestats.analysis.pipeline import Analysis, analyze, load_results

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
sys.path.insert(0, str(HERE.parent))
import readme_findings  # noqa: E402  (examples/readme_findings.py: the README section's markers, --write, --check)

GROUP = "sst2+mrpc+stsb"
TASKS = ["sst2", "mrpc", "stsb"]
FROZEN = [3, 5]
METRIC = {"sst2": "accuracy", "mrpc": "F1", "stsb": "Pearson"}
# The source (one run per setting, full data, BERT-base with 12 layers): freezing all but the last 3 layers in
# the group took STS Pearson from 0.55 to 0.69; cross- instead of bi-encoding took paraphrase (Quora) accuracy
# from 0.82 to 0.88 and STS Pearson from 0.69 to 0.87.
SOURCE_FREEZE_GAIN = {"stsb": 0.69 - 0.55}
SOURCE_CROSS_OVER_BI = {"mrpc": 0.88 - 0.82, "stsb": 0.87 - 0.69}


def load_inputs() -> pd.DataFrame:
    """The study's results table, read from a copy of ``study.db`` (a running study may replace the file)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "study.db"
        with sqlite3.connect(HERE / "study.db") as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        return load_results(storage=f"sqlite:///{copy}")


def run_analysis(results: pd.DataFrame) -> Analysis:
    """``freezestats analyze`` with every default."""
    return analyze(results)


def pts(value: float) -> str:
    """A score or difference in points, one decimal, with a real minus sign."""
    return f"{100 * value:+.1f}".replace("-", "−")


def estimate(row: pd.Series | None, low: str = "ci_low_adj", high: str = "ci_high_adj") -> str:
    """``+x.x [lo, hi]`` in points, or a dash where the contrast was not computed."""
    if row is None:
        return "–"
    if pd.isna(row[low]):
        return f"{pts(row['estimate'])} (no interval)"
    return f"{pts(row['estimate'])} [{pts(row[low])}, {pts(row[high])}]"


def _row(table: pd.DataFrame, **where: object) -> pd.Series | None:
    mask = pd.Series(True, index=table.index)
    for column, value in where.items():
        mask &= table[column] == value
    hits = table[mask]
    return None if hits.empty else hits.iloc[0]


def freezing_section(analysis: Analysis) -> list[str]:
    """Each frozen depth minus full fine-tuning, alone (the freeze model) and in the group (shared encoder)."""
    alone = analysis.tables["contrasts"]
    alone = alone[alone["fit"] == "all_runs"]
    shared = analysis.tables["shared_encoder"]
    within = shared[shared["comparison"] == "frozen_vs_0"]
    head = [f"alone: {k} − 0" for k in FROZEN] + [f"together: {k} − 0" for k in FROZEN]
    lines = readme_findings.table_head(
        "**Freezing, per task: each frozen depth minus full fine-tuning (frozen 0)**, held-out metric in points, "
        "estimate [95% interval, Holm-adjusted within a task, size and family]. Alone: the freeze model of the "
        "runs trained alone; together: the shared-encoder model (alone and group runs of the task in one fit):",
        ["task (metric)", "n", *head],
        "lr" + "l" * len(head),
    )
    for task in TASKS:
        for size in sorted(within.loc[within["task"] == task, "train_size"].unique()):
            cells = [estimate(_row(alone, task=task, train_size=size, frozen_layers=k)) for k in FROZEN]
            cells += [estimate(_row(within, task=task, train_size=size, frozen_layers=k)) for k in FROZEN]
            lines.append(readme_findings.table_row([f"{task} ({METRIC[task]})", size, *cells]))
    return lines


def shared_section(analysis: Analysis) -> list[str]:
    """Together minus alone at each depth, and how much more freezing helps together than alone."""
    shared = analysis.tables["shared_encoder"]
    levels = sorted(shared.loc[shared["comparison"] == "together_vs_alone", "frozen_layers"].unique())
    head = [f"together − alone, frozen {k}" for k in levels] + [f"freezing gain together − alone, {k}" for k in FROZEN]
    lines = readme_findings.table_head(
        "**Training with the other tasks**: the group's score minus the score trained alone at each depth, and "
        "the difference of the freezing gains, (together k − 0) − (alone k − 0), in points [95%, Holm]:",
        ["task", "n", *head],
        "lr" + "l" * len(head),
    )
    for task in TASKS:
        for size in sorted(shared.loc[shared["task"] == task, "train_size"].unique()):
            mine = shared[(shared["task"] == task) & (shared["train_size"] == size)]
            cells = [estimate(_row(mine, comparison="together_vs_alone", frozen_layers=k)) for k in levels]
            cells += [estimate(_row(mine, comparison="freezing_gain_difference", frozen_layers=k)) for k in FROZEN]
            lines.append(readme_findings.table_row([task, size, *cells]))
    return lines


def pair_section(analysis: Analysis) -> list[str]:
    """Bi minus cross encoding at frozen 3, paired by seed, alone and in the group."""
    pairs = analysis.tables["pair_encoding"]
    lines = readme_findings.table_head(
        "**Cross- against bi-encoding** (frozen 3; bi: one pass per sentence, mean-pooled; a scaled cosine for "
        "STS-B, a linear layer on [u, v, |u − v|, u * v] for MRPC), paired by seed, held-out metric in points:",
        ["task", "trained", "n", "seeds", "cross", "bi", "bi − cross [95%, Holm]"],
        "llrrrrl",
    )
    for row in pairs.sort_values(["task", "trained_with", "train_size"]).itertuples():
        trained = "alone" if row.trained_with == row.task else "together"
        diff = estimate(pd.Series(row._asdict()), "ci_low", "ci_high")
        cells = [row.task, trained, row.train_size, row.n_pairs, f"{100 * row.cross:.1f}", f"{100 * row.bi:.1f}", diff]
        lines.append(readme_findings.table_row(cells))
    return lines


def source_section(analysis: Analysis) -> list[str]:
    """Our estimates beside the source's single-run differences, at our largest size."""
    shared, pairs = analysis.tables["shared_encoder"], analysis.tables["pair_encoding"]
    size = int(shared["train_size"].max())
    lines = readme_findings.table_head(
        f"**Beside the source** (one run per setting, full training sets, BERT-base; ours at n = {size}, "
        "MiniLM-L6; the source froze 9 of 12 layers, between our 3 and 5 of 6):",
        ["claim", "source", "ours [95%]"],
        "lrl",
    )
    for task, gain in SOURCE_FREEZE_GAIN.items():
        for k in FROZEN:
            row = _row(shared, task=task, comparison="frozen_vs_0", frozen_layers=k, train_size=size)
            lines.append(f"| {task}: freezing in the group, frozen {k} − 0 | {pts(gain)} | {estimate(row)} |")
    for task, gain in SOURCE_CROSS_OVER_BI.items():
        for trained in (task, GROUP):
            row = _row(pairs, task=task, trained_with=trained, train_size=size)
            if row is not None:  # ours is bi − cross: turn it round to the source's cross − bi
                row = row.copy()
                row["estimate"], row["ci_low"], row["ci_high"] = -row["estimate"], -row["ci_high"], -row["ci_low"]
            where = "alone" if trained == task else "together"
            lines.append(f"| {task}: cross − bi ({where}) | {pts(gain)} | {estimate(row, 'ci_low', 'ci_high')} |")
    return lines


def time_section(results: pd.DataFrame) -> list[str]:
    """Trial-hours by what a trial trained, from each trial's own wall time (one per trial, not per task row)."""
    trials = results.groupby("trial").agg(
        trained=("trained_with", "first"), pair=("pair_encoding", "first"), seconds=("wall_seconds", "max")
    )
    kinds = trials.groupby(["trained", "pair"])["seconds"].agg(["count", "mean", "sum"])
    total = trials["seconds"].sum() / 3600
    lines = readme_findings.table_head(
        "**Time** (training wall time of each completed trial, as recorded; 2-core AMD EPYC with AVX512-BF16, "
        "bf16, one torch thread per trial):",
        ["trained", "encoding", "trials", "mean s per trial", "trial-hours"],
        "llrrr",
    )
    for (trained, pair), row in kinds.iterrows():
        cells = [trained, pair, int(row["count"]), f"{row['mean']:.0f}", f"{row['sum'] / 3600:.2f}"]
        lines.append(readme_findings.table_row(cells))
    lines.append(readme_findings.table_row(["all", "", len(trials), "", f"{total:.2f}"]))
    return lines


def findings_markdown() -> str:
    results = load_inputs()
    analysis = run_analysis(results)
    sections = [
        freezing_section(analysis),
        shared_section(analysis),
        pair_section(analysis),
        source_section(analysis),
        time_section(results),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


if __name__ == "__main__":
    sys.exit(readme_findings.main(README, findings_markdown, __doc__.splitlines()[0]))
