"""Split a pretrained encoder into embeddings / layers / head and freeze a prefix of it.

The study's independent variable is the *freeze depth* ``k``: how much of the bottom of a pretrained
encoder is kept fixed while the rest is fine-tuned. For the measurement to mean the same thing across
architectures, "layer i" must be located structurally (the i-th transformer block of the encoder),
not guessed from parameter names, and every parameter must be accounted for: a parameter that is
neither in the embeddings, a layer nor the head would silently stay trainable at every depth and
bias the comparison. :func:`locate_encoder` therefore refuses models it cannot partition exactly.

*Freezing rules* (how a depth ``k`` becomes ``requires_grad`` flags) are looked up by name (the spec's
``freezing``, in ``[model]`` or the freeze arm's table), so alternatives can be added with
:func:`register_freezing` without touching the trainer; the ``freeze`` arm (:class:`freezestats.arms.FreezeArm`)
applies the one the spec names. They were called *strategies* before (``register_strategy``, ``get_strategy``,
``available_strategies``, ``FreezeStrategy``): those names still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import difflib
import operator
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from torch import nn

from freezestats.exceptions import ModelError, SpecError

__all__ = [
    "SUPPORTED_FAMILIES",
    "EncoderParts",
    "FreezingRule",
    "available_freezings",
    "count_parameters",
    "freeze",
    "get_freezing",
    "locate_encoder",
    "n_layers",
    "register_freezing",
]

SUPPORTED_FAMILIES: tuple[str, ...] = (
    "BERT (incl. MiniLM)",
    "RoBERTa",
    "DistilBERT",
    "ELECTRA",
    "DeBERTa",
    "DeBERTa-v2/v3",
)

FreezingRule = Callable[[nn.Module, int], None]
"""A freezing rule mutates ``requires_grad`` of a model in place, given the requested freeze depth."""

# Attribute of the base model's encoder container that holds the ordered transformer blocks
# (``encoder.layer`` for BERT/RoBERTa/ELECTRA/DeBERTa, ``transformer.layer`` for DistilBERT).
_LAYER_LIST_ATTR = "layer"

# Encoder-level modules that DeBERTa shares across all layers (see EncoderParts). Only accepted on an
# encoder that exposes DeBERTa's ``get_rel_embedding`` hook: other architectures use the same names
# for different things (e.g. a *final* encoder LayerNorm applied after the last layer), and such a
# module must fall through to the coverage check instead of being misfiled as "embedding stage".
_SHARED_ENCODER_MODULES = ("rel_embeddings", "LayerNorm", "conv")
_SHARED_ENCODER_MARKER = "get_rel_embedding"


@dataclass(frozen=True)
class EncoderParts:
    """The three stages of an encoder classifier, in forward order.

    ``embeddings``
        Everything computed before the first transformer block: the embeddings module (word,
        position and token-type embeddings with their LayerNorm) plus, for ELECTRA, the
        ``embeddings_project`` that maps the small embedding width onto the hidden width. For DeBERTa
        and DeBERTa-v2/v3 it also holds the encoder-level ``rel_embeddings`` table and (v2/v3) the
        encoder ``LayerNorm`` that normalises it: they are read by *every* layer, so attributing them
        to layer 1 (or to any single layer) would be arbitrary, and they are grouped with the
        embeddings so that "freeze the first k layers" never freezes part of what layer k+1 uses.
        The DeBERTa-v2 ``conv`` block (present only when ``conv_kernel_size > 0``, e.g. the v2
        xlarge/xxlarge checkpoints, not v3) is filed here as well for the same reason of being an
        encoder-level module; note that it actually runs once, merging the embedding output into
        layer 1's output, so the only observable effect of this choice is that ``k = -1`` freezes it.
    ``layers``
        The encoder's transformer blocks, bottom to top.
    ``head``
        Every remaining module with parameters (pooler, pre_classifier, classifier, ...); never frozen.
    ``encoder``
        The module that runs ``layers`` (its ``layer`` list); the frozen-prefix cache cuts it there.
    """

    embeddings: tuple[nn.Module, ...]
    layers: tuple[nn.Module, ...]
    head: tuple[nn.Module, ...]
    encoder: nn.Module


def _unsupported(model: nn.Module, reason: str) -> ModelError:
    return ModelError(
        f"Cannot split {type(model).__name__} into embeddings/layers/head: {reason}. "
        f"Supported families: {', '.join(SUPPORTED_FAMILIES)}."
    )


def _has_parameters(module: nn.Module) -> bool:
    return next(module.parameters(), None) is not None


def _find_encoder(model: nn.Module, base: nn.Module) -> tuple[str, nn.Module, nn.ModuleList]:
    """Find the unique child of ``base`` whose ``layer`` attribute is the list of transformer blocks."""
    candidates = [
        (name, child, getattr(child, _LAYER_LIST_ATTR))
        for name, child in base.named_children()
        if isinstance(getattr(child, _LAYER_LIST_ATTR, None), nn.ModuleList)
    ]
    if len(candidates) != 1:
        found = [name for name, _, _ in candidates]
        raise _unsupported(
            model,
            f"expected exactly one child of the base model {type(base).__name__} with a "
            f"`{_LAYER_LIST_ATTR}` ModuleList (e.g. `encoder.layer`, `transformer.layer`), found {found}",
        )
    name, encoder, layers = candidates[0]
    if len(layers) == 0:
        raise _unsupported(model, f"`{name}.{_LAYER_LIST_ATTR}` is empty")
    return name, encoder, layers


def _check_partition(model: nn.Module, parts: EncoderParts) -> None:
    """Every parameter must belong to exactly one stage, else some freeze depth would be a lie."""
    owner: dict[int, str] = {}
    duplicated: list[str] = []
    groups: list[tuple[str, Iterable[nn.Module]]] = [
        ("embeddings", parts.embeddings),
        *((f"layers[{i}]", (layer,)) for i, layer in enumerate(parts.layers)),
        ("head", parts.head),
    ]
    for group, modules in groups:
        seen_in_group: set[int] = set()
        for module in modules:
            for param in module.parameters():
                key = id(param)
                if key in seen_in_group:
                    continue
                seen_in_group.add(key)
                if key in owner:
                    duplicated.append(f"{owner[key]}+{group}")
                owner[key] = group
    names = {id(p): n for n, p in model.named_parameters()}
    missing = [name for key, name in names.items() if key not in owner]
    if missing:
        raise _unsupported(
            model,
            f"every parameter must belong to exactly one of embeddings/layers/head, but "
            f"{len(missing)} belong to none (would stay trainable at every freeze depth): {missing[:8]}",
        )
    if duplicated:
        raise _unsupported(
            model,
            f"every parameter must belong to exactly one of embeddings/layers/head, but "
            f"{len(duplicated)} are shared between stages: {sorted(set(duplicated))[:8]}",
        )
    stray = [key for key in owner if key not in names]
    if stray:  # pragma: no cover - only possible if a stage holds modules from another model
        raise _unsupported(model, f"{len(stray)} located parameters are not parameters of the model")


def locate_encoder(model: nn.Module) -> EncoderParts:
    """Partition an ``AutoModelForSequenceClassification`` model into embeddings, layers and head.

    The base model is found through transformers' ``base_model`` (``base_model_prefix``), the blocks
    as the one child with a ``layer`` ModuleList, and the embeddings as the ``embeddings`` child (plus
    any sibling whose name starts with ``embeddings``, e.g. ELECTRA's ``embeddings_project``). Working
    from structure rather than class names keeps look-alike checkpoints (MiniLM is BERT, XLM-R is
    RoBERTa) working, while the final partition check rejects anything with parameters we did not
    place, instead of leaving them silently trainable.

    Raises:
        ModelError: the structure is not one of :data:`SUPPORTED_FAMILIES`, or its parameters do not
            partition exactly into the three stages.
    """
    base = getattr(model, "base_model", None)
    if not isinstance(base, nn.Module):
        raise _unsupported(model, "it has no transformers `base_model`")
    embeddings = getattr(base, "embeddings", None)
    if not isinstance(embeddings, nn.Module):
        raise _unsupported(model, f"its base model {type(base).__name__} has no `embeddings` module")
    _, encoder, layer_list = _find_encoder(model, base)

    embedding_stage: list[nn.Module] = [embeddings]
    head: list[nn.Module] = []
    for name, child in base.named_children():
        if child is embeddings or child is encoder or not _has_parameters(child):
            continue
        (embedding_stage if name.startswith("embeddings") else head).append(child)

    if hasattr(encoder, _SHARED_ENCODER_MARKER):
        for name in _SHARED_ENCODER_MODULES:
            shared = getattr(encoder, name, None)
            if isinstance(shared, nn.Module) and _has_parameters(shared):
                embedding_stage.append(shared)

    if base is not model:
        head.extend(child for child in model.children() if child is not base and _has_parameters(child))

    parts = EncoderParts(
        embeddings=tuple(embedding_stage),
        layers=tuple(layer_list),
        head=tuple(head),
        encoder=encoder,
    )
    _check_partition(model, parts)
    return parts


def n_layers(model: nn.Module) -> int:
    """Number of transformer blocks ``L``; valid freeze depths are ``-1..L``."""
    return len(locate_encoder(model).layers)


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """Return ``(trainable, total)`` parameter counts (shared parameters counted once)."""
    trainable = total = 0
    for param in model.parameters():
        total += param.numel()
        if param.requires_grad:
            trainable += param.numel()
    return trainable, total


# ---------------------------------------------------------------------------------------------------
# Freezing-rule registry
# ---------------------------------------------------------------------------------------------------

_FREEZINGS: dict[str, FreezingRule] = {}


def register_freezing(name: str) -> Callable[[FreezingRule], FreezingRule]:
    """Decorator registering a freezing rule under ``name`` (returns the function unchanged).

    Duplicate names are an error rather than a silent override: two rules answering to the same
    name would make recorded study results ambiguous.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"A freezing rule's name must be a non-empty string, but got {name!r}.")

    def decorator(func: FreezingRule) -> FreezingRule:
        if name in _FREEZINGS:
            raise ValueError(
                f"Freezing rule names must be unique, but {name!r} is already registered "
                f"(by {_FREEZINGS[name].__qualname__})."
            )
        _FREEZINGS[name] = func
        return func

    return decorator


def available_freezings() -> list[str]:
    """Names of the registered freezing rules, sorted."""
    return sorted(_FREEZINGS)


def get_freezing(name: str) -> FreezingRule:
    """Look up a freezing rule by name; unknown names raise :class:`SpecError` with close matches."""
    try:
        return _FREEZINGS[name]
    except (KeyError, TypeError):
        pass
    available = available_freezings()
    close = difflib.get_close_matches(str(name), available, n=3) if isinstance(name, str) else []
    hint = f" Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
    raise SpecError(f"Unknown freezing rule {name!r}.{hint} Available: {', '.join(available) or '(none)'}.")


_RENAMED = {
    "FreezeStrategy": "FreezingRule",
    "available_strategies": "available_freezings",
    "get_strategy": "get_freezing",
    "register_strategy": "register_freezing",
}
"""The registry's names from when freezing rules were called strategies (user plugins call them)."""


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        warnings.warn(
            f"freezestats.encoder.freezing.{name} is deprecated: use {_RENAMED[name]} (the same, renamed)",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _as_depth(frozen_layers: object) -> int:
    if isinstance(frozen_layers, bool):
        raise SpecError(f"`frozen_layers` must be an integer, but got frozen_layers={frozen_layers!r}.")
    try:
        return operator.index(frozen_layers)  # type: ignore[arg-type]
    except TypeError:
        raise SpecError(
            f"`frozen_layers` must be an integer, but got frozen_layers={frozen_layers!r} "
            f"({type(frozen_layers).__name__})."
        ) from None


@register_freezing("freeze")
def freeze(model: nn.Module, frozen_layers: int) -> None:
    """Freeze the bottom of ``model`` to depth ``frozen_layers`` (``k``), in place.

    * ``k = -1``: freeze the embeddings only;
    * ``k = 0``: freeze nothing (full fine-tuning);
    * ``1 <= k <= L``: freeze the embeddings and the first ``k`` encoder layers; at ``k = L`` only
      the head (pooler/classifier) trains.

    Every parameter's ``requires_grad`` is set explicitly (to ``True`` above the cut), so the result
    depends only on ``k`` and not on what was frozen before — a model can be re-used across trials.
    Only ``requires_grad`` changes, never train/eval mode: frozen layers keep their dropout active,
    as in the reference protocol, so the depths differ in what is *updated*, not in the forward pass.

    Raises:
        SpecError: ``k`` is not an integer in ``-1..L``.
        ModelError: the model cannot be partitioned (see :func:`locate_encoder`).
    """
    depth = _as_depth(frozen_layers)
    parts = locate_encoder(model)
    n = len(parts.layers)
    if not -1 <= depth <= n:
        raise SpecError(
            f"`frozen_layers` must be in -1..{n} for {type(model).__name__} ({n} encoder layers; "
            f"-1 = embeddings only, 0 = nothing, {n} = all but the head), but got frozen_layers={depth}."
        )
    model.requires_grad_(True)
    if depth == 0:
        return
    frozen = [*parts.embeddings, *parts.layers[: max(depth, 0)]]
    for module in frozen:
        module.requires_grad_(False)
