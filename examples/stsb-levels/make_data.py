"""Write the worked example's data: STS-B sentence pairs with their 0-5 similarity binned into three classes.

    python examples/stsb-levels/make_data.py [GLUE_DIR] [OUT_DIR]

GLUE_DIR defaults to $FREEZESTATS_DATA, else ../shared/data/glue beside the repository; OUT_DIR to ``data/`` beside
this script (git-ignored: GLUE's text is not copied into the project, it is derived here at run time). The classes
follow STS-B's annotation scale: below 2 the sentences share at most some details (``low``), from 2 to below 4
they are roughly to mostly equivalent (``mid``), from 4 they are equivalent up to unimportant details (``high``).

Train is the whole STS-B train split (5,749 pairs); validation is 600 of STS-B's 1,500 dev pairs, drawn stratified by
class with a fixed seed, so that evaluating every half epoch stays CPU-sized. Each row keeps STS-B's ``idx`` as its
``id``. The output is byte-identical on every run, which the study's data identity (a sha256 per file) relies on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BINS = [0.0, 2.0, 4.0, np.inf]
LEVELS = ["low", "mid", "high"]
N_VALIDATION = 600
SEED = 2026


def binned(frame: pd.DataFrame) -> pd.DataFrame:
    """STS-B rows as the example's CSV rows: id, the two sentences, and the similarity class."""
    similarity = pd.cut(frame["label"], BINS, labels=LEVELS, right=False).astype(str)
    return pd.DataFrame(
        {"id": frame["idx"], "sentence1": frame["sentence1"], "sentence2": frame["sentence2"], "similarity": similarity}
    )


def stratified_sample(frame: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows with each class in proportion (largest remainders), in their original order."""
    rng = np.random.default_rng(seed)
    shares = frame["similarity"].value_counts(normalize=True).reindex(LEVELS) * n
    counts = np.floor(shares).astype(int)
    counts[(shares - counts).sort_values(ascending=False).index[: n - counts.sum()]] += 1
    members = {level: np.flatnonzero(frame["similarity"] == level) for level in LEVELS}
    chosen = [rng.choice(members[level], counts[level], replace=False) for level in LEVELS]
    return frame.iloc[np.sort(np.concatenate(chosen))]


def main(glue: Path, out: Path) -> None:
    stsb = glue / "stsb"
    if not (stsb / "train.parquet").is_file():
        raise SystemExit(f"make_data: no STS-B at {stsb} (give GLUE_DIR, or set FREEZESTATS_DATA)")
    out.mkdir(parents=True, exist_ok=True)
    train = binned(pd.read_parquet(stsb / "train.parquet"))
    validation = stratified_sample(binned(pd.read_parquet(stsb / "validation.parquet")), N_VALIDATION, SEED)
    for name, frame in (("train", train), ("validation", validation)):
        frame.to_csv(out / f"{name}.csv", index=False)
        counts = frame["similarity"].value_counts().reindex(LEVELS).to_dict()
        print(f"{out / f'{name}.csv'}: {len(frame)} rows {counts}")


if __name__ == "__main__":
    default_glue = os.environ.get("FREEZESTATS_DATA") or HERE.parents[2] / "shared" / "data" / "glue"
    glue_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(default_glue)
    main(glue_dir, Path(sys.argv[2]) if len(sys.argv) > 2 else HERE / "data")
