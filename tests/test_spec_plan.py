"""``freezestats plan SPEC`` and ``validate``: a design priced before it runs, and a pool too small to decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from freezestats.analysis.spec_plan import items_needed, plan_spec
from freezestats.cli.main import main
from freezestats.spec.study import load_spec
from freezestats.stats.decision.crossed import VarianceParts
from freezestats.stats.decision.plan import power
from freezestats.tasks.bundled import bundled_path


def test_items_needed_is_the_fewest_that_reach_the_power() -> None:
    parts = VarianceParts(0.2**2, 6.0**2, 28.0**2)
    need = items_needed(parts, 10, 1.0, 0.8)
    assert need is not None and power(parts, 10, need, 1.0).power >= 0.8
    assert power(parts, 10, int(need * 0.98), 1.0).power < 0.8
    assert items_needed(VarianceParts(1.5**2, 6.0**2, 28.0**2), 10, 1.0, 0.8) is None  # seeds alone are too noisy


def _quick(tmp_path: Path, seeds: str, pool: int) -> Path:
    """The quick study at n = 1000 with the shallow depths, where the prior says items decide."""
    text = bundled_path("study/quick.toml").read_text().replace("seeds = [1, 2, 3]", f"seeds = {seeds}")
    text = text.replace("frozen_layers = [0, 3, 6]", "frozen_layers = [-1, 0, 1]")
    path = tmp_path / "spec.toml"
    path.write_text(
        text.replace("train_sizes = [200, 400]", "train_sizes = [1000]").replace("pool = 500", f"pool = {pool}")
    )
    return path


def test_plan_prices_each_size_and_depth_and_warns_of_a_small_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_path = _quick(tmp_path, "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", 300)
    assert main(["plan", str(spec_path)]) == 0
    out = capsys.readouterr().out
    spec = load_spec(spec_path)
    plan = plan_spec(spec, {"agreement": 300})
    assert {(r.train_size, r.depth) for r in plan} == {(1000, -1), (1000, 1)}
    for row in plan:
        assert row.seed_sd_high > row.parts.seed**0.5  # the prior's seed SD is priced with its uncertainty
        assert f"{row.train_size:>5} {row.depth:>5} " in out
    worst = max(r.items_needed for r in plan)
    warning = f"set `[evaluation] pool` to at least {worst:,}."
    assert worst > 300 and warning in out and "30 runs" in out
    assert main(["validate", str(spec_path)]) == 0
    assert warning in capsys.readouterr().out  # validate warns too, in one line


def test_no_warning_where_the_pool_suffices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_spec(load_spec(_quick(tmp_path, "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", 300)), {"agreement": 300})
    enough = max(r.items_needed for r in plan)
    assert main(["validate", str(_quick(tmp_path, "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", min(enough, 2500)))]) == 0
    out = capsys.readouterr().out
    assert ("  warning: " in out) == (enough > 2500)
