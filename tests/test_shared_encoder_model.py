"""The shared-encoder model: one encoder, each task's head the single-task runner's."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import set_seed

from freezestats.encoder.backbone import load_classifier, load_tokenizer
from freezestats.encoder.freezing import count_parameters
from freezestats.tasks import get_task
from freezestats.training.shared_encoder import build_shared_encoder_model


def test_heads_share_one_encoder_and_keep_their_task_losses(tiny_model: Path) -> None:
    tasks = [get_task("sst2"), get_task("stsb")]
    model = build_shared_encoder_model(str(tiny_model), tasks, load_classifier)
    sst2, stsb = model.classifier("sst2"), model.classifier("stsb")
    assert sst2.base_model is stsb.base_model is model.encoder
    alone = load_classifier(str(tiny_model), 2, False)
    encoder = count_parameters(alone.base_model)[1]
    head = count_parameters(alone)[1] - encoder
    assert count_parameters(model)[1] == encoder + head + head // 2  # shared once; STS-B's head has 1 output
    batch = dict(load_tokenizer(str(tiny_model))(["a fine film", "dull"], padding=True, return_tensors="pt"))
    out = model("stsb", **batch, labels=torch.tensor([1.0, 4.0]))
    assert out.logits.shape == (2, 1) and stsb.config.problem_type == "regression"
    assert model("sst2", **batch, labels=torch.tensor([1, 0])).logits.shape == (2, 2)
    parts = model.parts("stsb")
    assert parts.layers == tuple(model.encoder.encoder.layer) and stsb.classifier in parts.head


def test_a_group_of_one_is_the_single_task_model(tiny_model: Path) -> None:
    set_seed(5)
    alone = load_classifier(str(tiny_model), 2, False)
    set_seed(5)
    group = build_shared_encoder_model(str(tiny_model), [get_task("sst2")], load_classifier).classifier("sst2")
    mine, theirs = alone.state_dict(), group.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
