"""Markdown (pipe) tables for the report: the only place where the analysis' numbers are rounded.

Pipe tables are the table syntax that Quarto and plain pandoc read alike, in HTML and Typst output. Every
function returns the presented DataFrame (strings, as shown) next to its markdown, so the report can also
keep the table as parquet for anyone who wants to restyle it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from freezestats.analysis.summary import fmt_p
from freezestats.report.figures import frozen_label, frozen_order

__all__ = ["blog_table", "count_range", "fmt_num", "fmt_p", "markdown", "present", "sorted_cells"]

Formatter = Callable[[object], str]


def fmt_num(digits: int = 3) -> Formatter:
    """A formatter with ``digits`` decimals that shows missing values as an en dash."""

    def fmt(value: object) -> str:
        if value is None or (isinstance(value, float) and not np.isfinite(value)) or value is pd.NA:
            return "–"
        if isinstance(value, (bool, np.bool_)):
            return "yes" if value else "no"
        if isinstance(value, (int, np.integer)):
            return str(int(value))
        try:
            return f"{float(value):.{digits}f}"
        except (TypeError, ValueError):
            return str(value)

    return fmt


def count_range(counts: pd.Series, noun: str) -> str:
    """How many ``noun`` the cells have: "3 seeds", or "3–5 seeds" where a study is unbalanced."""
    lo, hi = int(counts.min()), int(counts.max())
    return f"{lo} {noun}" if lo == hi else f"{lo}–{hi} {noun}"


def _escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(frame: pd.DataFrame, caption: str | None = None, label: str | None = None) -> str:
    """A pipe table of an all-string frame; numeric-looking columns are right-aligned.

    With ``caption`` the table gets ``: caption {#label}``, which Quarto and ``crossref.lua`` number.
    """
    if frame.empty:
        return "*(no rows)*"
    header = "| " + " | ".join(_escape(c) for c in frame.columns) + " |"

    def numeric(column: str) -> bool:
        values = frame[column].astype(str).str.replace("*", "", regex=False)
        return bool(values.str.fullmatch(r"[-+−–<>\d., %e]+").all())

    rows = ["| " + " | ".join(_escape(v) for v in row) + " |" for row in frame.astype(str).itertuples(index=False)]
    # Wide pipe tables take their relative column widths from the dashes of this rule (pandoc and Quarto
    # alike), so each column gets dashes in proportion to its longest entry: long model terms do not overlap. A
    # floor of 6 keeps a short column ("n", "task") from being squeezed under its cell padding in a wide table.
    widths = [max([6, len(str(c)), *(len(str(v)) for v in frame[c])]) for c in frame.columns]
    rule = (
        "|"
        + "|".join(
            ("-" * max(3, w - 1) + ":") if numeric(c) else (":" + "-" * max(3, w - 1))
            for c, w in zip(frame.columns, widths, strict=True)
        )
        + "|"
    )
    text = "\n".join([header, rule, *rows])
    if caption:
        text += f"\n\n: {caption}" + (f" {{#{label}}}" if label else "")
    return text


def present(
    table: pd.DataFrame, columns: Mapping[str, str], formats: Mapping[str, Formatter] | None = None
) -> pd.DataFrame:
    """Select and rename ``columns`` ({source: header}) and format every value as text.

    ``frozen_layers`` is shown as the report's axes show it (``emb.`` for -1); other columns use
    ``formats`` or three decimals.
    """
    formats = dict(formats or {})
    shown = pd.DataFrame(index=table.index)
    for source, header in columns.items():
        if source not in table.columns:
            continue
        if source == "frozen_layers":
            fmt: Formatter = frozen_label  # type: ignore[assignment]
        elif source in formats:
            fmt = formats[source]
        elif source in ("train_size", "n", "n_failed", "trainable_layers", "n_pairs"):
            fmt = fmt_num(0)
        elif source.startswith("p_") or source.endswith("_p"):
            fmt = fmt_p
        else:
            fmt = fmt_num(3)
        shown[header] = [fmt(v) for v in table[source]]
    return shown.reset_index(drop=True)


def sorted_cells(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` sorted by train size, then from least to most frozen (the order of every report table)."""
    depth = {k: i for i, k in enumerate(frozen_order(table["frozen_layers"]))}
    return (
        table.assign(_depth=table["frozen_layers"].map(depth))
        .sort_values(["train_size", "_depth"])
        .drop(columns="_depth")
        .reset_index(drop=True)
    )


_BLOG_COLUMNS = {"mean": "mean", "median": "50%", "std": "std", "min": "min", "max": "max"}


def blog_table(summary: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The blog's appendix table: train size, frozen layers, mean, 50%, std, min, max.

    Within each train size, the best value of each column is bold: the highest mean, median, min and max,
    and the lowest std (the most stable level), as in the blog post.
    """
    table = sorted_cells(summary)
    shown = present(table, {"train_size": "train size", "frozen_layers": "frozen layers", **_BLOG_COLUMNS}, {})
    for source, header in _BLOG_COLUMNS.items():
        best = table.groupby("train_size")[source].transform("min" if source == "std" else "max")
        values = [f"{v:.{digits}f}" if np.isfinite(v) else "–" for v in table[source].to_numpy(float)]
        shown[header] = [
            f"**{text}**" if np.isfinite(v) and np.isclose(v, b) else text
            for text, v, b in zip(values, table[source].to_numpy(float), best.to_numpy(float), strict=True)
        ]
    return shown


def adjusted_interval(row: pd.Series) -> str:
    """``estimate [ci_low_adj, ci_high_adj]`` with signs, as the contrast tables of the new sections show them."""
    return f"{row['estimate']:+.4f} [{row['ci_low_adj']:+.4f}, {row['ci_high_adj']:+.4f}]"
