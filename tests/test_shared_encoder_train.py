"""Training a task group: one task reproduces the single-task run, and ``freeze_for`` is checked on weights."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from _factories import fine_tune_alone, fine_tune_together, group_member

from freezestats.spec import GroupSpec, TrainingSpec
from freezestats.training.shared_encoder._steps import GroupSteps

SPEC = TrainingSpec(epochs=2, batch_size=16, eval_every_epochs=0.5, device="cpu", precision="fp32")


@pytest.mark.parametrize(
    ("frozen", "frozen_dropout"),
    [(0, "on"), (1, "on"), (1, "off")],  # 1: evaluation through the frozen-prefix cache; "off": training too
)
def test_a_group_of_one_task_is_the_single_task_run(
    tiny_model: Path, glue_dir: Path, frozen: int, frozen_dropout: str
) -> None:
    member = group_member("sst2", tiny_model, glue_dir, n_val=80)
    training = replace(SPEC, frozen_dropout=frozen_dropout)
    alone = fine_tune_alone(tiny_model, member, frozen, training)
    together = fine_tune_together(tiny_model, GroupSpec("just-sst2", ("sst2",)), [member], frozen, training)["sst2"]
    assert together.curve == alone.curve  # every point: step, epoch, train loss, every metric
    assert together.summary == alone.summary  # best_dev, final_dev, heldout
    assert (together.n_steps, together.final_train_loss) == (alone.n_steps, alone.final_train_loss)
    assert np.array_equal(together.final_logits, alone.final_logits)
    assert together.extra["trained_with"] == "just-sst2" and together.extra["task_steps"] == alone.n_steps
    assert together.extra["train_prefix_cached"] == alone.extra["train_prefix_cached"] == (frozen_dropout == "off")


def _frozen_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The embeddings and layer 0 of the shared encoder (frozen at level 1 of the 2-layer model)."""
    return {
        name: p.detach().clone()
        for name, p in model.named_parameters()
        if ".embeddings." in name or ".encoder.layer.0." in name
    }


def _watch_steps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Record, for every group step, its task and whether it left the frozen weights bit-identical."""
    seen: list[tuple[str, bool]] = []
    real_step = GroupSteps.step

    def step(self: GroupSteps, task: str, batch: list[int], step: int = 0) -> float:
        before = _frozen_weights(self.model)
        loss = real_step(self, task, batch, step)
        after = _frozen_weights(self.model)
        seen.append((task, all(torch.equal(before[k], after[k]) for k in before)))
        return loss

    monkeypatch.setattr(GroupSteps, "step", step)
    return seen


def test_freeze_for_some_tasks_leaves_the_frozen_weights_to_the_others(
    tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _watch_steps(monkeypatch)
    members = [
        group_member("sst2", tiny_model, glue_dir, n_val=80),
        group_member("stsb", tiny_model, glue_dir, n_val=80),
    ]
    group = GroupSpec("sst2+stsb", ("sst2", "stsb"), freeze_for=("stsb",))
    # Weight decay: a step with a zero gradient would shrink the weights, and AdamW's momentum would move them.
    outcomes = fine_tune_together(tiny_model, group, members, 1, replace(SPEC, weight_decay=0.1))
    tasks = [task for task, _ in seen]
    assert tasks.count("stsb") == tasks.count("sst2") == 6
    first_sst2 = tasks.index("sst2")
    assert "stsb" in tasks[first_sst2 + 1 :]  # an stsb step after the frozen layers gained momentum
    assert all(unchanged for task, unchanged in seen if task == "stsb")
    assert not any(unchanged for task, unchanged in seen if task == "sst2")
    assert outcomes["stsb"].extra["frozen_for_task"] and not outcomes["sst2"].extra["frozen_for_task"]
    assert not outcomes["stsb"].extra["eval_prefix_cached"]  # the frozen layers change: nothing to cache


def test_freeze_for_all_never_updates_the_frozen_layers(
    tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _watch_steps(monkeypatch)
    members = [
        group_member("sst2", tiny_model, glue_dir, n_val=80),
        group_member("stsb", tiny_model, glue_dir, n_val=80),
    ]
    outcomes = fine_tune_together(tiny_model, GroupSpec("sst2+stsb", ("sst2", "stsb")), members, 1, SPEC)
    assert len(seen) == 12 and all(unchanged for _, unchanged in seen)
    sst2, stsb = outcomes["sst2"], outcomes["stsb"]
    assert set(sst2.curve[-1]["metrics"]) == {"accuracy"} and "pearson" in stsb.curve[-1]["metrics"]
    assert sst2.extra["task_steps"] + stsb.extra["task_steps"] == sst2.n_steps == 12
    assert [p["step"] for p in sst2.curve] == [p["step"] for p in stsb.curve] == [3, 6, 9, 12]
    assert sst2.extra["eval_prefix_cached"] and stsb.extra["eval_prefix_cached"]  # the cache works per task
