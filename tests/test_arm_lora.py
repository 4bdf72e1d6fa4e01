"""The ``lora`` arm (peft): adapters on the attention projections of each family, the head trained, the rest fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _factories import simple_spec
from test_freezing import FAMILIES, L

from freezestats.arms import LoraArm, get_arm
from freezestats.arms._lora import lora_targets
from freezestats.encoder.freezing import locate_encoder
from freezestats.exceptions import SpecError
from freezestats.spec import parse_spec

LORA_FAMILIES = {f.name: f for f in FAMILIES}  # every family the freeze arm supports
TRAINED = ("bert", "roberta", "distilbert", "deberta-v2")  # the families a short training run is checked on
TARGETS = {
    "bert": ("query", "value"),
    "roberta": ("query", "value"),
    "distilbert": ("q_lin", "v_lin"),
    "electra": ("query", "value"),
    "deberta": ("in_proj",),
    "deberta-v2": ("query_proj", "value_proj"),
    "deberta-v3": ("query_proj", "value_proj"),
}


def _build(name: str) -> torch.nn.Module:
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(LORA_FAMILIES[name].config)


def _expected_trainable(model: torch.nn.Module, targets: tuple[str, ...], rank: int) -> int:
    """rank * (in + out) per adapted projection in every layer, plus every head parameter."""
    adapted = [
        module
        for layer in locate_encoder(model).layers
        for name, module in layer.named_modules()
        if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets
    ]
    assert len(adapted) == len(targets) * L
    head = sum(p.numel() for module in locate_encoder(model).head for p in module.parameters())
    return sum(rank * (m.in_features + m.out_features) for m in adapted) + head


@pytest.mark.parametrize("name", sorted(LORA_FAMILIES))
@pytest.mark.parametrize("rank", [2, 8])
def test_the_trainable_parameters_are_the_adapters_and_the_head(name: str, rank: int) -> None:
    model = _build(name)
    assert lora_targets(model) == TARGETS[name]
    expected = _expected_trainable(model, TARGETS[name], rank)
    built = LoraArm().prepare_model(model, rank)
    trainable = {n for n, p in built.named_parameters() if p.requires_grad}
    assert sum(p.numel() for p in built.parameters() if p.requires_grad) == expected
    assert all("lora_" in n or any(n.startswith(h) for h in LORA_FAMILIES[name].head_prefixes) for n in trainable)
    assert all(".lora_" not in n for n, p in built.named_parameters() if not p.requires_grad)
    locate_encoder(built)  # the trainer can still split it


@pytest.mark.parametrize("name", TRAINED)
def test_a_short_training_run_moves_the_adapters_and_leaves_the_base_weights(name: str) -> None:
    model = LoraArm(dropout=0.0).prepare_model(_build(name), 4)
    base = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    adapters = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_B" in n}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randint(5, 100, (8, 12), generator=generator)
    labels = torch.tensor([0, 1] * 4)
    model.train()
    losses = []
    for _ in range(5):
        loss = model(input_ids=inputs, attention_mask=torch.ones_like(inputs), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert all(torch.equal(p, base[n]) for n, p in model.named_parameters() if n in base)  # bit-identical
    assert any(not torch.equal(p, adapters[n]) for n, p in model.named_parameters() if n in adapters)


def test_options_and_levels_are_checked_in_the_spec() -> None:
    def spec(arm: dict) -> dict:
        raw = simple_spec()
        del raw["grid"]["frozen_layers"]
        raw["arms"] = [{"kind": "lora", **arm}]
        return raw

    (variant,) = parse_spec(spec({"rank": [4, 16]})).arm_variants()
    assert variant.learning_rate == 5e-4 and variant.options == {"scaling": 1.0, "dropout": 0.1}
    assert get_arm("lora").from_options(variant.options).options() == {"scaling": 1.0, "dropout": 0.1}
    for bad, message in (
        ({"rank": [0]}, r"`arms\[0\]\.rank\[0\]` must be an integer in 1\.\.1024"),
        ({"rank": [4], "dropout": 1.0}, r"`arms\[0\]\.dropout` must lie in \[0, 1\)"),
        ({"rank": [4], "scaling": "big"}, r"`arms\[0\]\.scaling` must be a float"),
        ({"rank": [4], "top_layers": [1]}, r"Unknown key 'arms\[0\]\.top_layers' for arm kind 'lora'"),
    ):
        with pytest.raises(SpecError, match=message):
            parse_spec(spec(bad))


def test_a_lora_study_runs_in_the_shared_loop(tmp_path: Path, tiny_model: Path, glue_dir: Path) -> None:
    from freezestats.results.export import results_table
    from freezestats.runner import run_study
    from freezestats.study.trials import load_study, open_storage

    raw = simple_spec(str(tiny_model), grid={"train_sizes": [32], "seeds": [1]})
    del raw["grid"]["frozen_layers"]
    raw["arms"] = [{"kind": "lora", "rank": [2]}, {"kind": "freeze", "frozen_layers": [2]}]
    spec = parse_spec(raw)
    storage = f"sqlite:///{tmp_path / 'lora.db'}"
    run_study(spec, storage, data_dir=glue_dir, show_progress=False)
    table = results_table(load_study(open_storage(storage), spec.name)).set_index("arm")
    lora, head_only = table.loc["lora"], table.loc["freeze"]
    assert lora["arm_level"] == 2 and lora["learning_rate"] == 5e-4 and lora["n_steps"] == 2
    hidden, layers = 32, 2  # the tiny model's: 2 adapted projections per layer, rank 2, 32 -> 32
    assert lora["trainable_params"] == head_only["trainable_params"] + layers * 2 * 2 * (hidden + hidden)
    assert lora["total_params"] == head_only["total_params"] + layers * 2 * 2 * (hidden + hidden)
    assert 0 <= lora["heldout"] <= 1 and lora["failed"] in (True, False)
