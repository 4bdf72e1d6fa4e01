"""Factories for small valid study specs (TOML text), so each test states only what it varies."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def simple_spec(model: str = "minilm-l6", **sections: dict[str, Any]) -> dict[str, Any]:
    """A small valid spec as plain data; ``sections`` override tables, e.g. grid={"seeds": [3]}."""
    spec: dict[str, Any] = {
        "version": 1,
        "name": "test-study",
        "tasks": ["sst2"],
        "model": {"name": model, "freezing": "freeze"},
        "grid": {"frozen_layers": [0, 2], "train_sizes": [32, 64], "seeds": [1], "subset_draws": 1},
        "training": {"epochs": 1, "batch_size": 16, "eval_every_epochs": 0.5, "eval_batch_size": 256},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


def to_toml(spec: dict[str, Any]) -> str:
    """TOML text for a spec made by :func:`simple_spec` (top-level scalars first, then tables)."""

    def is_tables(value: Any) -> bool:  # an array of tables: [[key]]
        return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)

    lines = [f"{k} = {_toml_value(v)}" for k, v in spec.items() if not isinstance(v, dict) and not is_tables(v)]
    for key, table in spec.items():
        if isinstance(table, dict):
            lines.append(f"[{key}]")
            lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items())
    for key, tables in spec.items():
        if is_tables(tables):
            for table in tables:
                lines.append(f"[[{key}]]")
                lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items())
    return "\n".join(lines) + "\n"


def write_spec(folder: Path, spec: dict[str, Any], name: str = "spec.toml") -> Path:
    path = folder / name
    path.write_text(to_toml(spec))
    return path


# the tiny encoders' sizes (trials take ~1 s), with MiniLM's vocabulary
_TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 37}


def _save_tiny(folder: Path, family: str) -> Path:
    """A tiny encoder of ``family`` ("bert" or "roberta") with random weights and MiniLM's tokenizer in ``folder``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, RobertaConfig, RobertaModel

    from freezestats.encoder.backbone import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("minilm-l6"))
    torch.manual_seed(0)
    if family == "bert":
        model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=128, **_TINY))
    else:  # RoBERTa's position ids start after the padding id: room for max_length + 2, the tokenizer's padding id
        config = RobertaConfig(
            vocab_size=tokenizer.vocab_size,
            max_position_embeddings=130,
            type_vocab_size=2,
            pad_token_id=tokenizer.pad_token_id,
            **_TINY,
        )
        model = RobertaModel(config, add_pooling_layer=False)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_model(folder: Path) -> Path:
    """A 2-layer BERT with random weights and MiniLM's vocabulary saved in ``folder`` (trials take ~1 s)."""
    return _save_tiny(folder, "bert")


def build_tiny_roberta(folder: Path) -> Path:
    """A 2-layer RoBERTa with random weights saved in ``folder``, with MiniLM's (BERT) tokenizer: RoBERTa's own
    BPE files are not shipped offline, and what differs from BERT in the model (the position ids counted from the
    padding id, the head) does not depend on the tokenizer."""
    return _save_tiny(folder, "roberta")


SMALL_VALIDATION_ROWS = 256
"""Validation rows per task in :func:`build_small_glue`'s copy."""


def build_small_glue(glue_dir: Path, folder: Path) -> Path:
    """GLUE as ``glue_dir`` lays it out, with each task's validation split cut to its first
    :data:`SMALL_VALIDATION_ROWS` rows and its train split linked unchanged.

    Why: a run scores the whole dev set at every evaluation, and in the runner, worker and report tests that is most
    of a run's time (SST-2's 872 rows against 32-200 training examples). Those tests check what the runner stores,
    not the dev set; tests of the dev set's size or of numbers computed on it read ``glue_dir`` itself.
    """
    import pandas as pd

    for task in sorted(p for p in glue_dir.iterdir() if (p / "validation.parquet").is_file()):
        (folder / task.name).mkdir(parents=True)
        (folder / task.name / "train.parquet").symlink_to(task / "train.parquet")
        validation = pd.read_parquet(task / "validation.parquet").head(SMALL_VALIDATION_ROWS)
        validation.to_parquet(folder / task.name / "validation.parquet", index=False)
    return folder


def group_member(name: str, model: Path, glue_dir: Path, encoding: str = "cross", n_train: int = 48, n_val: int = 64):
    """A task's small real splits (a nested subset of ``n_train``, the first ``n_val`` validation rows), encoded
    ``encoding`` and named as the runner names them: what ``fine_tune`` and ``fine_tune_group`` train on."""
    from dataclasses import replace

    from freezestats.encoder.backbone import load_tokenizer
    from freezestats.tasks import get_task
    from freezestats.tasks.data import load_task_data
    from freezestats.tasks.subsets import nested_subsets, validation_halves
    from freezestats.training import encode_split
    from freezestats.training.shared_encoder import GroupMember

    task = get_task(name)
    data = load_task_data(task, glue_dir)
    tokenizer = load_tokenizer(str(model))
    rows = nested_subsets(data.train_labels, [n_train], draw_seed=0, regression=task.is_regression)[n_train]
    train, val = data.train.iloc[rows], data.validation.iloc[:n_val]
    cols = task.text_columns
    enc_train = encode_split([train[c].tolist() for c in cols], train["label"].to_numpy(), tokenizer, 64, "", encoding)
    enc_val = encode_split([val[c].tolist() for c in cols], val["label"].to_numpy(), tokenizer, 64, "", encoding)
    select, score = validation_halves(enc_val.labels, regression=task.is_regression)
    suffix = "" if encoding == "cross" else f"/{encoding}"
    return GroupMember(
        task,
        task.metrics[0],
        replace(enc_train, name=f"{name}/train{suffix}"),
        replace(enc_val, name=f"{name}/validation{suffix}"),
        select,
        score,
    )


def fine_tune_alone(model: Path, member: Any, frozen: int, training: Any, **kwargs: Any) -> Any:
    """``fine_tune`` on one :func:`group_member` as the single-task runner calls it (seed 3, rate 1e-3)."""
    from freezestats.encoder.backbone import load_tokenizer
    from freezestats.training import fine_tune

    return fine_tune(
        model_name=str(model),
        task=member.task,
        metric=member.metric,
        train=member.train,
        validation=member.validation,
        select_idx=member.select_idx,
        score_idx=member.score_idx,
        frozen_layers=frozen,
        seed=3,
        learning_rate=1e-3,
        training=training,
        tokenizer=load_tokenizer(str(model)),
        **kwargs,
    )


def fine_tune_together(model: Path, group: Any, members: list, frozen: int, training: Any, **kwargs: Any) -> Any:
    """``fine_tune_group`` on :func:`group_member` s with the seed and rate of :func:`fine_tune_alone`, so that a
    group of one can be compared with its task trained alone."""
    from freezestats.encoder.backbone import load_tokenizer
    from freezestats.training.shared_encoder import fine_tune_group

    return fine_tune_group(
        model_name=str(model),
        group=group,
        members=members,
        frozen_layers=frozen,
        seed=3,
        learning_rate=1e-3,
        training=training,
        tokenizer=load_tokenizer(str(model)),
        **kwargs,
    )
