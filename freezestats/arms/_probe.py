"""The ``probe`` arm: L2-regularised logistic regression on the frozen encoder's pooled features.

A linear probe is the CPU-friendly, statistically stable baseline every adaptation method should beat.
It needs no training loop, so the arm overrides :meth:`Arm.run`: the frozen encoder's hidden states are
pooled (``mean`` over the tokens, or the ``cls`` token) at the cell's layer (0: the embeddings; ``L`` or
``"last"``: the top layer), and scikit-learn fits a logistic regression whose ``C`` is chosen by
stratified cross-validation *on the training subset only* (folds = min(5, smallest class count); the
validation set never chooses anything). Regression tasks get a ridge regression, its ``alpha`` chosen
the same way.

Features are computed once per (model, pooling, example) and process, for every layer at once, and reused
across layers, sizes, draws and seeds (:func:`features`): a probe cell then costs the fit alone. They are
kept in memory only, like the frozen-prefix cache. Given
the features and the subset the fit is deterministic, so a probe has no seed variance.

So that the probe is comparable with the fine-tuned arms it reports the same numbers: its one model is
its one "checkpoint" (``best``, ``heldout`` and ``final`` alike), scored on the whole validation set
(``best_dev`` = ``final_dev``: the dev score of the chosen C) and on the score half (``heldout``, as the
evaluator defines it: chosen without the score half, scored on it). Its logits are the log-probabilities.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from freezestats.arms._base import Arm
from freezestats.arms._probe_features import clear_feature_cache, features
from freezestats.arms._registry import register_arm
from freezestats.spec.arm_kinds import POOLINGS, ProbeKind

if TYPE_CHECKING:
    from torch import nn

    from freezestats.spec.study import StudySpec
    from freezestats.training._outcome import RunOutcome

__all__ = ["POOLINGS", "ProbeArm", "clear_feature_cache", "features"]


@register_arm("probe")
class ProbeArm(Arm, ProbeKind):
    """``layers = l``: a linear probe on layer ``l``'s pooled output; ``pooling`` is an option axis."""

    def __init__(self, pooling: str = "mean") -> None:
        self.pooling = pooling

    @classmethod
    def from_spec(cls, spec: StudySpec) -> ProbeArm:
        for variant in spec.arm_variants():
            if variant.kind == cls.name:
                return cls.from_options(variant.options)
        return cls()

    def options(self) -> dict[str, Any]:
        return {"pooling": self.pooling}

    def valid_levels(self, n_layers: int) -> Sequence[int]:
        return range(0, n_layers + 1)

    def prepare_model(self, model: nn.Module, level: int) -> nn.Module:
        """The encoder is frozen whole; only a probe on top of it is fitted (in :meth:`run`)."""
        model.requires_grad_(False)
        return model

    def run(self, *, level: int, **inputs: Any) -> RunOutcome:
        """Pool the frozen features of layer ``level``, fit the probe on the train subset, score it."""
        from freezestats.arms._probe_fit import fit_probe

        return fit_probe(self.pooling, level, **inputs)
