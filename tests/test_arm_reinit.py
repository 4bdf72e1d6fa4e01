"""The ``reinit`` arm: exactly the top k layers and the pooler get new weights, from the seed, and all train."""

from __future__ import annotations

import pytest
import torch
from test_freezing import FAMILIES, FAMILY_IDS, L, _build

from freezestats.arms import ReinitArm, get_arm
from freezestats.arms._reinit import reinit_modules


def _pretrained_like(family) -> torch.nn.Module:
    """A tiny model whose every tensor is off its init values and flagged as loaded, as from_pretrained leaves it."""
    model = _build(family)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param))
            param._is_hf_initialized = True
    return model


def _owned_by(model: torch.nn.Module, modules: list[torch.nn.Module]) -> set[str]:
    inside = {id(p) for module in modules for p in module.parameters()}
    return {name for name, p in model.named_parameters() if id(p) in inside}


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("top", [1, 2])
def test_exactly_the_top_layers_and_the_pooler_change_and_everything_trains(family, top: int) -> None:
    model = _pretrained_like(family)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    targets = _owned_by(model, reinit_modules(model, top))
    torch.manual_seed(0)
    assert ReinitArm().prepare_model(model, top) is model
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert changed == targets  # every re-initialised tensor changed, every other one is bit-identical
    layer = family.layer_prefix.format(L - 1)
    assert any(name.startswith(layer) for name in changed)
    assert not any(name.startswith(family.layer_prefix.format(L - top - 1)) for name in changed)
    if family.name == "bert":
        assert any(name.startswith("bert.pooler.") for name in changed)
    assert all(p.requires_grad for p in model.parameters())


def test_the_same_seed_gives_the_same_weights_and_another_seed_others() -> None:
    def weights(seed: int) -> dict[str, torch.Tensor]:
        model = _pretrained_like(FAMILIES[0])
        torch.manual_seed(seed)
        ReinitArm().prepare_model(model, 2)
        return {name: p.detach().clone() for name, p in model.named_parameters()}

    one, again, other = weights(1), weights(1), weights(2)
    assert all(torch.equal(one[name], again[name]) for name in one)
    assert not torch.equal(
        one["bert.encoder.layer.3.output.dense.weight"], other["bert.encoder.layer.3.output.dense.weight"]
    )


def test_level_zero_changes_nothing_and_levels_are_checked() -> None:
    model = _pretrained_like(FAMILIES[0])
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ReinitArm().prepare_model(model, 0)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())
    assert list(ReinitArm().valid_levels(L)) == list(range(L + 1))
    assert get_arm("reinit") is ReinitArm and ReinitArm.level_axis == "top_layers"
    with pytest.raises(ValueError, match=r"top_layers must lie in 0\.\.4"):
        reinit_modules(model, L + 1)
