"""Write the nested stratified train subsets of the shipped GLUE studies as index files.

freezestats draws these subsets itself at run time (``freezestats.tasks.subsets.nested_subsets``) and stores
them in every study; shipping them as files lets anyone audit or reuse the exact examples without
running anything. ``tests/test_splits.py`` recomputes them from the GLUE data, so they cannot drift.

Usage: ``FREEZESTATS_DATA=../shared/data/glue python data/splits/make_splits.py``
"""

from __future__ import annotations

import json
from pathlib import Path

from freezestats.tasks import get_task
from freezestats.tasks.data import load_task_data
from freezestats.tasks.subsets import nested_subsets

SIZES = (50, 100, 200, 500, 1000)
TASKS = ("sst2", "cola")
OUT = Path(__file__).resolve().parent


def splits_for(task_name: str, draw: int = 0) -> dict[str, object]:
    """The subsets of one task and draw as a JSON-ready dict (indices are GLUE train rows, i.e. ``idx``)."""
    task = get_task(task_name)
    data = load_task_data(task)
    subsets = nested_subsets(data.train_labels, SIZES, draw_seed=draw, regression=task.is_regression)
    return {
        "task": task_name,
        "task_version": task.version,
        "subset_draw": draw,
        "pool_size": len(data.train),
        "note": "nested (each size contains the smaller ones) and stratified by label; indices are train rows",
        "indices": {str(size): idx.tolist() for size, idx in subsets.items()},
    }


def main() -> None:
    for task_name in TASKS:
        path = OUT / f"{task_name}_draw0.json"
        path.write_text(json.dumps(splits_for(task_name), indent=None, separators=(",", ":")) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
