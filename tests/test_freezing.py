"""Tests for freezestats.encoder.freezing.

The expected trainable set for each freeze depth is derived here from parameter-name prefixes written
out per family, independently of ``locate_encoder`` (which works from module structure), so the two
have to agree for the tests to pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch import nn
from transformers import (
    AutoModelForSequenceClassification,
    BertConfig,
    DebertaConfig,
    DebertaV2Config,
    DistilBertConfig,
    ElectraConfig,
    GPT2Config,
    GPT2ForSequenceClassification,
    PretrainedConfig,
    RobertaConfig,
)

from freezestats.encoder import freezing
from freezestats.encoder.freezing import (
    EncoderParts,
    available_freezings,
    count_parameters,
    freeze,
    get_freezing,
    locate_encoder,
    n_layers,
    register_freezing,
)
from freezestats.exceptions import FreezestatsError, ModelError, SpecError

L = 4
_COMMON = dict(vocab_size=100, hidden_size=32, num_hidden_layers=L, num_attention_heads=2, intermediate_size=37)


@dataclass(frozen=True)
class Family:
    name: str
    config: PretrainedConfig
    embedding_prefixes: tuple[str, ...]
    layer_prefix: str  # formatted with the layer index
    head_prefixes: tuple[str, ...]


FAMILIES = [
    Family(
        "bert",
        BertConfig(**_COMMON),
        ("bert.embeddings.",),
        "bert.encoder.layer.{}.",
        ("bert.pooler.", "classifier."),
    ),
    Family(
        "roberta",
        RobertaConfig(**_COMMON),
        ("roberta.embeddings.",),
        "roberta.encoder.layer.{}.",
        ("classifier.",),
    ),
    Family(
        "distilbert",
        DistilBertConfig(vocab_size=100, n_layers=L, dim=32, hidden_dim=37, n_heads=2),
        ("distilbert.embeddings.",),
        "distilbert.transformer.layer.{}.",
        ("pre_classifier.", "classifier."),
    ),
    Family(
        "electra",
        ElectraConfig(embedding_size=16, **_COMMON),
        ("electra.embeddings.", "electra.embeddings_project."),
        "electra.encoder.layer.{}.",
        ("classifier.",),
    ),
    Family(
        "deberta",
        DebertaConfig(relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=16, **_COMMON),
        ("deberta.embeddings.", "deberta.encoder.rel_embeddings."),
        "deberta.encoder.layer.{}.",
        ("pooler.", "classifier."),
    ),
    Family(
        "deberta-v2",  # v2-xlarge-like: conv block and normalised relative embeddings
        DebertaV2Config(
            relative_attention=True,
            position_buckets=8,
            max_relative_positions=16,
            pos_att_type=["c2p", "p2c"],
            norm_rel_ebd="layer_norm",
            conv_kernel_size=3,
            **_COMMON,
        ),
        (
            "deberta.embeddings.",
            "deberta.encoder.rel_embeddings.",
            "deberta.encoder.LayerNorm.",
            "deberta.encoder.conv.",
        ),
        "deberta.encoder.layer.{}.",
        ("pooler.", "classifier."),
    ),
    Family(
        "deberta-v3",  # v3-like: shared attention keys, no absolute positions, no token types, no conv
        DebertaV2Config(
            relative_attention=True,
            position_buckets=8,
            max_relative_positions=-1,
            pos_att_type=["p2c", "c2p"],
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            position_biased_input=False,
            type_vocab_size=0,
            **_COMMON,
        ),
        ("deberta.embeddings.", "deberta.encoder.rel_embeddings.", "deberta.encoder.LayerNorm."),
        "deberta.encoder.layer.{}.",
        ("pooler.", "classifier."),
    ),
]
FAMILY_IDS = [f.name for f in FAMILIES]


def _build(family: Family) -> nn.Module:
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(family.config)


@pytest.fixture(scope="module")
def models() -> dict[str, nn.Module]:
    # Built once per module: ``freeze`` sets every requires_grad explicitly, so re-use is safe.
    return {f.name: _build(f) for f in FAMILIES}


def _trainable(model: nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if p.requires_grad}


def _expected_trainable(family: Family, names: set[str], k: int) -> set[str]:
    frozen_prefixes = (
        *(family.embedding_prefixes if k != 0 else ()),
        *(family.layer_prefix.format(i) for i in range(max(k, 0))),
    )
    return {n for n in names if not n.startswith(frozen_prefixes)}


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_prefixes_partition_every_parameter(family: Family, models: dict[str, nn.Module]) -> None:
    """Sanity check of the test's own oracle: each name matches exactly one stage prefix."""
    model = models[family.name]
    stages = [family.embedding_prefixes, *((family.layer_prefix.format(i),) for i in range(L)), family.head_prefixes]
    for name, _ in model.named_parameters():
        hits = [s for s in stages if name.startswith(s)]
        assert len(hits) == 1, (name, hits)
    for stage in stages:
        assert any(name.startswith(stage) for name, _ in model.named_parameters()), stage


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_freeze_every_depth(family: Family, models: dict[str, nn.Module]) -> None:
    model = models[family.name]
    assert n_layers(model) == L
    names = {name for name, _ in model.named_parameters()}
    numel = {name: p.numel() for name, p in model.named_parameters()}
    total = sum(numel.values())
    for k in range(-1, L + 1):
        freeze(model, k)
        expected = _expected_trainable(family, names, k)
        assert _trainable(model) == expected, f"k={k}"
        assert count_parameters(model) == (sum(numel[n] for n in expected), total)
    # k = L: only the head is left; k = 0 afterwards really unfreezes everything again.
    freeze(model, L)
    assert _trainable(model) == {n for n in names if n.startswith(family.head_prefixes)}
    freeze(model, 0)
    assert _trainable(model) == names
    assert count_parameters(model) == (total, total)


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_locate_encoder_structure(family: Family, models: dict[str, nn.Module]) -> None:
    model = models[family.name]
    parts = locate_encoder(model)
    assert isinstance(parts, EncoderParts)
    modules = dict(model.named_modules())
    expected_layers = tuple(modules[family.layer_prefix.format(i).rstrip(".")] for i in range(L))
    assert len(parts.layers) == L
    assert all(a is b for a, b in zip(parts.layers, expected_layers, strict=True))
    assert {id(m) for m in parts.embeddings} == {id(modules[p.rstrip(".")]) for p in family.embedding_prefixes}
    assert {id(m) for m in parts.head} == {id(modules[p.rstrip(".")]) for p in family.head_prefixes}


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("k", [-1, 2])
def test_frozen_parameters_get_no_gradient(family: Family, k: int) -> None:
    model = _build(family)
    model.train()
    freeze(model, k)
    input_ids = torch.randint(1, 100, (3, 7))
    out = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=torch.tensor([0, 1, 1]))
    out.loss.backward()
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None, f"trainable {name} got no gradient"
        else:
            assert p.grad is None, f"frozen {name} got a gradient"
    # At least one parameter of the first trainable layer actually moved the loss.
    first = family.layer_prefix.format(max(k, 0))
    assert any(p.grad.abs().sum() > 0 for n, p in model.named_parameters() if n.startswith(first))


def test_freeze_keeps_train_eval_mode(models: dict[str, nn.Module]) -> None:
    model = models["bert"]
    for mode in (True, False):
        model.train(mode)
        freeze(model, 2)
        assert all(m.training is mode for m in model.modules())
    model.train()


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("k", [-2, -10, L + 1, 99])
def test_out_of_range_depth_raises(family: Family, k: int, models: dict[str, nn.Module]) -> None:
    model = models[family.name]
    freeze(model, 0)
    with pytest.raises(SpecError, match=rf"-1\.\.{L}") as info:
        freeze(model, k)
    assert f"frozen_layers={k}" in str(info.value)
    assert _trainable(model) == {n for n, _ in model.named_parameters()}  # untouched


@pytest.mark.parametrize("k", [1.0, "2", True, None])
def test_non_integer_depth_raises(k: object, models: dict[str, nn.Module]) -> None:
    with pytest.raises(SpecError, match="must be an integer"):
        freeze(models["bert"], k)  # type: ignore[arg-type]


def test_unsupported_gpt2_raises_model_error() -> None:
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2, pad_token_id=0)
    model = GPT2ForSequenceClassification(config)
    with pytest.raises(ModelError, match="GPT2ForSequenceClassification") as info:
        locate_encoder(model)
    assert "BERT" in str(info.value) and "DeBERTa" in str(info.value)
    with pytest.raises(ModelError):
        freeze(model, 1)
    with pytest.raises(ModelError):
        n_layers(model)


@pytest.mark.parametrize("model", [nn.Linear(3, 2), nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))])
def test_unsupported_plain_module_raises_model_error(model: nn.Module) -> None:
    with pytest.raises(ModelError, match=type(model).__name__):
        locate_encoder(model)
    assert issubclass(ModelError, FreezestatsError)


def test_unplaced_parameter_raises_model_error() -> None:
    """A parameter outside embeddings/layers/head would stay trainable at every depth: refuse."""
    model = _build(FAMILIES[0])
    model.bert.encoder.extra_norm = nn.LayerNorm(32)
    with pytest.raises(ModelError, match="belong to none") as info:
        freeze(model, 2)
    assert "bert.encoder.extra_norm.weight" in str(info.value)


def test_final_encoder_layernorm_is_not_misfiled() -> None:
    """``LayerNorm`` on a non-DeBERTa encoder (e.g. a final norm) must not count as embedding stage."""
    model = _build(FAMILIES[1])
    model.roberta.encoder.LayerNorm = nn.LayerNorm(32)
    with pytest.raises(ModelError, match="belong to none"):
        locate_encoder(model)


def test_parameter_shared_between_stages_raises_model_error() -> None:
    model = _build(FAMILIES[0])
    model.bert.pooler.dense.weight = model.bert.encoder.layer[0].attention.output.dense.weight
    with pytest.raises(ModelError, match="shared between stages"):
        locate_encoder(model)


def test_registry_lookup_and_suggestion() -> None:
    assert "freeze" in available_freezings()
    assert available_freezings() == sorted(available_freezings())
    assert get_freezing("freeze") is freeze
    with pytest.raises(SpecError, match=r"Unknown freezing rule 'freez'\. Did you mean: 'freeze'\? Available: .*"):
        get_freezing("freez")
    with pytest.raises(SpecError) as info:
        get_freezing("zzzzzz")
    assert "Did you mean" not in str(info.value) and "Available: " in str(info.value)


def test_registry_duplicate_and_new(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(freezing, "_FREEZINGS", dict(freezing._FREEZINGS))
    with pytest.raises(ValueError, match="'freeze' is already registered"):

        @register_freezing("freeze")
        def _again(model: nn.Module, frozen_layers: int) -> None:  # pragma: no cover
            pass

    assert get_freezing("freeze") is freeze  # the original survives

    @register_freezing("noop")
    def noop(model: nn.Module, frozen_layers: int) -> None:
        pass

    assert get_freezing("noop") is noop
    assert available_freezings() == ["freeze", "noop"]
    with pytest.raises(ValueError, match="non-empty string"):
        register_freezing("")


def test_the_registry_names_from_before_still_work_and_say_the_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """User plugins call ``register_strategy`` (the name before freezing rules were called so)."""
    monkeypatch.setattr(freezing, "_FREEZINGS", dict(freezing._FREEZINGS))
    with pytest.warns(DeprecationWarning, match="register_strategy is deprecated: use register_freezing"):
        from freezestats.encoder.freezing import register_strategy

    @register_strategy("old-plugin")
    def old_plugin(model: nn.Module, frozen_layers: int) -> None:
        pass

    with pytest.warns(DeprecationWarning, match="get_freezing"):
        assert freezing.get_strategy("old-plugin") is old_plugin is get_freezing("old-plugin")
    with pytest.warns(DeprecationWarning, match="available_freezings"):
        assert freezing.available_strategies() == ["freeze", "old-plugin"]
    with pytest.warns(DeprecationWarning, match="FreezingRule"):
        assert freezing.FreezeStrategy is freezing.FreezingRule
