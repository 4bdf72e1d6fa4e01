"""Task groups in the spec: parsed, validated with one-line messages, and absent from older specs' hashes."""

from __future__ import annotations

from pathlib import Path

import pytest
from _factories import simple_spec

from freezestats.exceptions import SpecError
from freezestats.spec import GroupSpec, StudySpec, load_spec, parse_spec

GROUP = {"name": "sst2+mrpc+stsb", "tasks": ["sst2", "mrpc", "stsb"]}

BAD_GROUPS = [
    ("unknown task", [{**GROUP, "tasks": ["sst2", "mrcp"]}], "Unknown task 'mrcp'. Did you mean: mrpc?"),
    ("zero tasks", [{**GROUP, "tasks": []}], "`groups[0].tasks` must be a non-empty list of task names"),
    ("repeated task", [{**GROUP, "tasks": ["sst2", "sst2"]}], "`groups[0].tasks` must not repeat values"),
    ("duplicate group name", [GROUP, {**GROUP, "tasks": ["sst2"]}], "`groups[].name` must not repeat values"),
    ("group named like a task", [{**GROUP, "name": "mrpc"}], "`groups[0].name` must not be a task's name"),
    ("missing name", [{"tasks": ["sst2"]}], "`groups[0].name` is required"),
    ("unknown key", [{**GROUP, "sample": "uniform"}], "Unknown key 'groups[0].sample'. Did you mean"),
    ("bad sampling", [{**GROUP, "sampling": "round-robin"}], "`groups[0].sampling` must be one of ['proportional'"),
    ("temperature unused", [{**GROUP, "temperature": 3.0}], "`groups[0].temperature` is set but"),
    ("zero temperature", [{**GROUP, "sampling": "temperature", "temperature": 0}], "must be > 0"),
    ("freeze_for stranger", [{**GROUP, "freeze_for": ["stsb", "cola"]}], "`groups[0].freeze_for[1]` must be one of"),
    ("freeze_for empty", [{**GROUP, "freeze_for": []}], "`groups[0].freeze_for` must be 'all' or a non-empty list"),
    ("freeze_for word", [{**GROUP, "freeze_for": "some"}], "`groups[0].freeze_for` must be 'all' or a non-empty"),
    ("groups not a list", {"name": "x"}, "`groups` must be an array of tables"),
]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"lr_search": {"mode": "per-cell", "rates": [1e-5]}}, "a learning-rate search for groups is not supported"),
        ({"grid": {"train_sizes": [32, "full"]}}, "must be numbers (each task's subset), not 'full'"),
    ],
)
def test_groups_refuse_what_they_cannot_run_yet(override: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_spec({**simple_spec(**override), "groups": [GROUP]})


def test_groups_and_arms_are_not_combined_yet() -> None:
    raw = simple_spec()
    del raw["grid"]["frozen_layers"]
    with pytest.raises(SpecError, match=r"`groups` and \[\[arms\]\] cannot be combined yet"):
        parse_spec({**raw, "arms": [{"kind": "freeze", "frozen_layers": [0, 1]}], "groups": [GROUP]})


@pytest.mark.parametrize(("what", "groups", "message"), BAD_GROUPS, ids=[b[0] for b in BAD_GROUPS])
def test_bad_group_is_refused_in_one_line(what: str, groups: object, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({**simple_spec(), "groups": groups}, source="bad.toml")
    text = str(err.value)
    assert message in text and "bad.toml" in text and "\n" not in text


def test_groups_parse_with_defaults_and_options() -> None:
    groups = [GROUP, {"name": "pairs", "tasks": ["mrpc", "stsb"], "sampling": "temperature", "freeze_for": ["stsb"]}]
    spec = parse_spec({**simple_spec(tasks=["sst2", "mrpc"]), "groups": groups})
    full, pairs = spec.groups
    assert full == GroupSpec("sst2+mrpc+stsb", ("sst2", "mrpc", "stsb"))
    assert (full.sampling, full.freeze_for, full.frozen_for("mrpc")) == ("proportional", "all", True)
    assert (pairs.sampling, pairs.temperature, pairs.freeze_for) == ("temperature", 2.0, ("stsb",))
    assert pairs.frozen_for("stsb") and not pairs.frozen_for("mrpc")
    assert spec.all_tasks == ("sst2", "mrpc", "stsb")  # a task only in a group is still one the study trains


def test_groups_round_trip_and_change_the_hash() -> None:
    plain = parse_spec(simple_spec())
    grouped = parse_spec({**simple_spec(), "groups": [{**GROUP, "freeze_for": ["stsb"]}]})
    assert "groups" not in plain.to_dict()  # specs without groups keep their stored form and hash
    assert grouped.spec_hash != plain.spec_hash
    again = StudySpec.from_stored(grouped.to_dict())
    assert again == grouped and again.spec_hash == grouped.spec_hash
    uniform = parse_spec({**simple_spec(), "groups": [{**GROUP, "sampling": "uniform"}]})
    assert "temperature" not in uniform.to_dict()["groups"][0]  # unused by that sampling: not part of the meaning


def test_primary_metric_may_name_a_task_of_a_group() -> None:
    spec = parse_spec({**simple_spec(metrics={"primary": {"stsb": "spearman"}}), "groups": [GROUP]})
    assert spec.metric_for("stsb") == "spearman"


def test_a_group_spec_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "groups.toml"
    path.write_text(
        'name = "mt"\ntasks = ["sst2"]\n[grid]\nfrozen_layers = [0]\ntrain_sizes = [32]\nseeds = [1]\n'
        '[[groups]]\nname = "sst2+stsb"\ntasks = ["sst2", "stsb"]\nsampling = "uniform"\nfreeze_for = "all"\n'
    )
    assert load_spec(path).groups == (GroupSpec("sst2+stsb", ("sst2", "stsb"), "uniform"),)
