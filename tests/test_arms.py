"""Arms: the registry and its errors, the contract every arm meets, ``freeze`` = the old freezing, plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
from _factories import simple_spec, write_spec
from test_freezing import FAMILIES, FAMILY_IDS, L, _build

from freezestats.arms import (
    Arm,
    FreezeArm,
    arm_for_spec,
    available_arms,
    get_arm,
    load_plugins,
    register_arm,
)
from freezestats.encoder.freezing import freeze, locate_encoder, register_freezing
from freezestats.exceptions import SpecError
from freezestats.spec import StudySpec, arm_kinds, parse_spec

USER_ARM = '''
from freezestats.arms import Arm, register_arm


@register_arm("{name}")
class HeadOnly(Arm):
    """Trains the head only, at its one level."""

    @classmethod
    def from_spec(cls, spec):
        return cls()

    def options(self):
        return {{}}

    def valid_levels(self, n_layers):
        return [0]

    def prepare_model(self, model, level):
        model.requires_grad_(False)
        return model
'''


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict:
    """A private copy of the arm registry, so arms registered by a test leave with it."""
    arms = dict(arm_kinds._KINDS)
    monkeypatch.setattr(arm_kinds, "_KINDS", arms)
    return arms


def _with_freezing(freezing: str) -> dict:
    spec = simple_spec()
    spec["model"]["freezing"] = freezing
    return spec


def _user_module(folder: Path, module: str, arm: str) -> None:
    (folder / f"{module}.py").write_text(textwrap.dedent(USER_ARM.format(name=arm)))


# -- the registry ----------------------------------------------------------------------------------


def test_freeze_is_registered_and_misses_name_what_is_there() -> None:
    assert "freeze" in available_arms() and available_arms() == sorted(available_arms())
    assert get_arm("freeze") is FreezeArm and FreezeArm.name == "freeze"
    with pytest.raises(SpecError, match=r"Unknown arm 'freez'\. Did you mean: 'freeze'\? Available: .*freeze"):
        get_arm("freez")
    with pytest.raises(SpecError) as info:
        get_arm("zzzzzz")
    assert "Did you mean" not in str(info.value) and "Available: " in str(info.value)
    with pytest.raises(SpecError, match="Unknown arm 3"):
        get_arm(3)  # type: ignore[arg-type]


def test_register_refuses_duplicates_non_arms_and_empty_names(registry: dict) -> None:
    with pytest.raises(ValueError, match="'freeze' is already registered"):

        @register_arm("freeze")
        class Again(FreezeArm):  # pragma: no cover
            pass

    assert get_arm("freeze") is FreezeArm  # the original survives
    with pytest.raises(TypeError, match="must decorate a subclass of Arm"):
        register_arm("not-an-arm")(dict)
    with pytest.raises(ValueError, match="non-empty string"):
        register_arm("")
    register_arm("freeze")(FreezeArm)  # the same class again (imported twice) is no conflict


def test_an_arm_must_implement_the_interface() -> None:
    class Partial(Arm):
        def options(self) -> dict:  # pragma: no cover
            return {}

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]


# -- the contract of every registered arm -----------------------------------------------------------


@pytest.mark.parametrize("name", available_arms())
def test_every_arm_meets_the_contract(name: str) -> None:
    arm_class = get_arm(name)
    arm = arm_class.from_spec(parse_spec(simple_spec()))
    assert isinstance(arm, arm_class) and arm.name == name and arm.level_axis
    json.dumps(arm.options())  # plain data: it is recorded with the study
    levels = list(arm.valid_levels(L))
    assert levels and all(isinstance(level, int) for level in levels)
    for level in sorted({levels[0], levels[len(levels) // 2], levels[-1]} if len(levels) > 8 else set(levels)):
        built = arm.prepare_model(_build(FAMILIES[0]), level)  # a fresh model: arms may wrap or inject into it
        locate_encoder(built)  # still an encoder classifier the trainer can split


# -- freeze: exactly the freezing of before -----------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES, ids=FAMILY_IDS)
def test_freeze_arm_freezes_exactly_as_freezing_freeze(family) -> None:
    arm = FreezeArm()
    assert list(arm.valid_levels(L)) == list(range(-1, L + 1))
    for level in arm.valid_levels(L):
        old, new = _build(family), _build(family)
        freeze(old, level)
        assert arm.prepare_model(new, level) is new
        assert {n: p.requires_grad for n, p in new.named_parameters()} == {
            n: p.requires_grad for n, p in old.named_parameters()
        }


def test_freeze_arm_reads_its_freezing_rule_from_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    from freezestats.encoder import freezing

    monkeypatch.setattr(freezing, "_FREEZINGS", dict(freezing._FREEZINGS))
    calls = []

    @register_freezing("recording")
    def recording(model, frozen_layers: int) -> None:
        calls.append(frozen_layers)

    arm = arm_for_spec(parse_spec(_with_freezing("recording")))
    assert isinstance(arm, FreezeArm) and arm.options() == {"freezing": "recording"}
    arm.prepare_model(_build(FAMILIES[0]), 2)
    assert calls == [2]
    with pytest.raises(SpecError, match="Unknown freezing rule 'frezee'"):
        arm_for_spec(parse_spec(_with_freezing("frezee")))  # refused before any training


# -- arms from user code: the spec's plugins, entry points ---------------------------------------------


def test_plugins_are_parsed_stored_and_kept_out_of_old_specs() -> None:
    spec = parse_spec(simple_spec(plugins=["my_arms", "lab.arms.probe"]))
    assert spec.plugins == ("my_arms", "lab.arms.probe")
    assert StudySpec.from_stored(spec.to_dict()).plugins == spec.plugins  # what a worker reads back
    plain = parse_spec(simple_spec())
    assert "plugins" not in plain.to_dict()  # specs without plugins keep their stored form and hash
    assert spec.spec_hash != plain.spec_hash
    for bad, message in (("my_arms", "must be a list"), (["my-arms"], "dotted module name"), ([3], "string")):
        with pytest.raises(SpecError, match=message):
            parse_spec(simple_spec(plugins=bad))
    with pytest.raises(SpecError, match="must not repeat"):
        parse_spec(simple_spec(plugins=["a", "a"]))


def test_an_unimportable_plugin_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"importing 'no_such_module_here' \(plugins\[0\]\) failed"):
        load_plugins(["no_such_module_here"])


def test_a_plugin_arm_registered_in_a_module_named_by_the_spec_reaches_a_worker_process(
    tmp_path: Path, tiny_model: Path, glue_dir: Path, monkeypatch: pytest.MonkeyPatch, registry: dict
) -> None:
    """A worker reads the spec from the study database, imports its plugins, and so knows the user's arm."""
    from freezestats.cli.main import main

    _user_module(tmp_path, "fs_user_arms_worker", "head_only_worker")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = write_spec(
        tmp_path,
        simple_spec(
            model=str(tiny_model),
            plugins=["fs_user_arms_worker"],
            grid={"frozen_layers": [0], "train_sizes": [32], "seeds": [1]},
        ),
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    args = ["--storage", storage, "--data-dir", str(glue_dir), "--no-progress"]
    assert main(["run", "--study", str(spec), "--enqueue-only", *args]) == 0
    assert "head_only_worker" in available_arms()  # imported here too, by the run's preparation

    code = (
        "import sys; from freezestats.arms import available_arms; "
        "from freezestats.runner import work_study; "
        "before = 'head_only_worker' in available_arms(); "
        f"work_study({storage!r}, data_dir={str(glue_dir)!r}, max_trials=0, show_progress=False); "
        "from freezestats.arms import get_arm; "
        "print(before, get_arm('head_only_worker').__module__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["False", "fs_user_arms_worker"]  # unknown until the stored spec named it


def test_entry_points_in_the_arms_group_are_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: dict
) -> None:
    _user_module(tmp_path, "fs_user_arms_ep", "head_only_ep")
    (tmp_path / "fs_user_arms_ep_class.py").write_text(
        "from freezestats.arms import FreezeArm\n\n\nclass Deeper(FreezeArm):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [
        metadata.EntryPoint("head_only_ep", "fs_user_arms_ep", arm_kinds.ENTRY_POINT_GROUP),  # a module
        metadata.EntryPoint("deeper", "fs_user_arms_ep_class:Deeper", arm_kinds.ENTRY_POINT_GROUP),  # a class
    ]
    groups = []

    def entry_points(group: str) -> list:
        groups.append(group)
        return points

    monkeypatch.setattr(arm_kinds, "metadata", SimpleNamespace(entry_points=entry_points))
    monkeypatch.setattr(arm_kinds, "_entry_points_loaded", False)
    assert {"head_only_ep", "deeper"} <= set(available_arms())
    assert get_arm("deeper").__name__ == "Deeper" and get_arm("deeper").name == "deeper"
    assert get_arm("head_only_ep").__module__ == "fs_user_arms_ep"
    assert groups == ["freezestats.arms"]  # loaded once per process


def test_a_broken_entry_point_fails_the_lookup_loudly(monkeypatch: pytest.MonkeyPatch, registry: dict) -> None:
    broken = metadata.EntryPoint("broken", "fs_no_such_module_anywhere", arm_kinds.ENTRY_POINT_GROUP)
    monkeypatch.setattr(arm_kinds, "metadata", SimpleNamespace(entry_points=lambda group: [broken]))
    monkeypatch.setattr(arm_kinds, "_entry_points_loaded", False)
    for _ in range(2):  # every look-up, not only the first: the arm must not go silently missing
        with pytest.raises(SpecError, match=r"entry point 'broken' \(fs_no_such_module_anywhere\) failed to load"):
            get_arm("freeze")
