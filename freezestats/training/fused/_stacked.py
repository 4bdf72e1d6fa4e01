"""K BERT or RoBERTa classifiers as one computation: parameters stacked where they train, shared where frozen.

The K runs of a cell start from the same pretrained encoder; what differs is the head's initialisation (and,
for an arm that re-initialises layers, those layers). So every parameter that trains is stacked into one
tensor with a leading run dimension (``(K, *shape)``), and every frozen parameter is kept once: a frozen
layer then runs as one large matrix product over all K runs' batches, a trained one as a batched product
(``baddbmm``) over the K weight matrices. This is the forward pass of transformers' ``BertForSequenceClassification``
written out (embeddings, blocks, pooler, classifier; for RoBERTa its own head), operation for operation, so that
a run computes what it computes alone; hidden states carry the run dimension first, ``(R, B, L, H)`` with ``R``
either K or 1 (one input shared by all runs: the validation set), broadcast where it meets stacked weights.

Dropout draws each run's masks from that run's own generator, over that run's own (unpadded) batch shape, in
the order transformers' BERT draws them (embeddings; per block the attention weights, the attention output, the
feed-forward output; the pooled output, or the two of RoBERTa's head), so a run's masks do not depend on which
other runs share its batch, and on CPU (where ``F.dropout`` and SDPA's math kernel draw ``bernoulli_`` of the
same shapes from the global generator) they are the masks the run draws alone. A change in transformers' order
of dropout calls would break that equality, not the method: ``tests/test_fused_training.py`` would say so.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["RunDropout", "StackedBert", "stacking_blocker"]

# the classifiers whose forward pass StackedBert writes out, and the family (the encoder's attribute) of each
_FAMILIES = {"BertForSequenceClassification": "bert", "RobertaForSequenceClassification": "roberta"}


def stacking_blocker(models: Sequence[nn.Module]) -> str | None:
    """Why these K models cannot be stacked (``None``: they can): a BERT or RoBERTa classifier with absolute
    positions, every parameter a known one, the same parameters training in each, the frozen ones equal."""
    first = models[0]
    config = first.config
    family = _FAMILIES.get(type(first).__name__)
    if family is None:
        return f"the fused trainer knows BERT and RoBERTa classifiers only, not {type(first).__name__}"
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return "the fused trainer knows absolute position embeddings only"
    names = [name for name, _ in first.named_parameters()]
    unknown = [name for name in names if not _known(name, config.num_hidden_layers, family)]
    if unknown:
        return f"parameters the fused trainer does not know (an adapter?): {unknown[:3]}"
    reference = dict(first.named_parameters())
    for model in models[1:]:
        params = dict(model.named_parameters())
        if list(params) != names:
            return "the runs' models differ in their parameters"
        for name, param in params.items():
            if param.requires_grad != reference[name].requires_grad:
                return f"the runs train different parameters ({name})"
            if not param.requires_grad and not torch.equal(param, reference[name]):
                return f"the runs' frozen parameter {name} differs"
    return None


_LAYER_PARAMS = tuple(
    f"{module}.{kind}"
    for module in (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "attention.output.LayerNorm",
        "intermediate.dense",
        "output.dense",
        "output.LayerNorm",
    )
    for kind in ("weight", "bias")
)
_EMBEDDING_PARAMS = (
    *(f"embeddings.{table}_embeddings.weight" for table in ("word", "position", "token_type")),
    "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias",
)
# the head: BERT's pooler (in the encoder) and a linear classifier; RoBERTa's classification head (dense, tanh,
# out_proj on the <s> token), which has no pooler
_HEAD_PARAMS = {
    "bert": ("bert.pooler.dense", "classifier"),
    "roberta": ("classifier.dense", "classifier.out_proj"),
}


def _known(name: str, n_layers: int, family: str) -> bool:
    """A parameter of transformers' BERT or RoBERTa classifier by its exact name (an adapter's wrapped ones are
    not)."""
    known = {f"{family}.{other}" for other in _EMBEDDING_PARAMS}
    known |= {f"{module}.{kind}" for module in _HEAD_PARAMS[family] for kind in ("weight", "bias")}
    known |= {f"{family}.encoder.layer.{i}.{param}" for i in range(n_layers) for param in _LAYER_PARAMS}
    return name in known


@dataclass
class RunDropout:
    """Dropout with one generator per run, each masking only its own run's unpadded positions (as ``F.dropout``:
    a ``bernoulli_(1 - p)`` mask divided by ``1 - p``).

    ``lengths[k]`` is run k's batch length (its longest example): the positions beyond it are padding added
    to stack it with longer batches, left unmasked so that run k draws as many numbers as it would alone.
    """

    generators: list[torch.Generator]
    lengths: list[int]

    def __call__(self, x: torch.Tensor, p: float, seq_dims: int) -> torch.Tensor:
        """Drop ``p`` of ``x`` (``(K, B, ...)``); its last ``seq_dims`` dimensions before the features are
        sequence positions (1 for hidden states, 2 for attention weights, 0 for pooled outputs)."""
        if p <= 0:
            return x
        # torch's own dropout scales in x's dtype on a CPU (``input * noise.div_(1 - p)``, a bf16 noise tensor
        # under autocast: 1/0.9 rounds to 1.109375) but in fp32 on CUDA (``native_dropout``'s kernel, then one
        # rounding to x's dtype); each device's lone run is mirrored, so that bf16 fused runs are not scaled down
        # by 0.16% at every dropout on a GPU
        cuda = x.device.type == "cuda"
        noise = torch.ones(x.shape, dtype=torch.float32 if cuda else x.dtype, device=x.device)
        for k, (generator, length) in enumerate(zip(self.generators, self.lengths, strict=True)):
            region = noise[k]
            if seq_dims == 1:
                region = region[:, :length]
            elif seq_dims == 2:
                region = region[..., :length, :length]
            region.bernoulli_(1 - p, generator=generator)
        return (x * noise.div_(1 - p)).to(x.dtype)

    def keep(self, index: list[int]) -> None:
        self.generators = [self.generators[i] for i in index]


class StackedBert(nn.Module):
    """K ``BertForSequenceClassification`` or ``RobertaForSequenceClassification`` models whose frozen parameters
    are equal (see :func:`stacking_blocker`). RoBERTa's encoder is BERT's; it differs in its position ids (counted
    from the padding id, over the unpadded tokens) and its head."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        super().__init__()
        first = models[0]
        self.config = first.config
        self.family = _FAMILIES[type(first).__name__]
        self.base = self.family + "."
        self.k = len(models)
        self.weights: dict[str, torch.Tensor] = {}
        self.stacked = nn.ParameterDict()
        named = [dict(model.named_parameters()) for model in models]
        for name, param in named[0].items():
            if param.requires_grad:
                stacked = nn.Parameter(torch.stack([params[name].detach() for params in named]).clone())
                self.stacked[name.replace(".", "__")] = stacked
                self.weights[name] = stacked
            else:
                self.weights[name] = param.detach()
        self.n_layers = self.config.num_hidden_layers
        self.heads = self.config.num_attention_heads
        from transformers.activations import ACT2FN

        self.act = ACT2FN[self.config.hidden_act]

    def keep(self, index: list[int]) -> dict[nn.Parameter, nn.Parameter]:
        """Keep only the runs ``index`` (a failed run leaves; the others' slices are untouched).

        The kept slices become new parameters (autograd remembers a leaf's shape, so a parameter cannot
        shrink in place); returns old -> new, for the optimizer to move its state.
        """
        rows = torch.as_tensor(index, device=next(iter(self.stacked.values())).device)
        moved: dict[nn.Parameter, nn.Parameter] = {}
        for key, old in list(self.stacked.items()):
            new = nn.Parameter(old.detach().index_select(0, rows))
            if old.grad is not None:
                new.grad = old.grad.index_select(0, rows)
            self.stacked[key] = new
            self.weights[key.replace("__", ".")] = new
            moved[old] = new
        self.k = len(index)
        return moved

    @contextmanager
    def alone(self, run: int) -> Iterator[None]:
        """Within: the model computes run ``run`` alone (its slices of the stacked weights, the shared ones).

        Why: on a CPU an evaluation of the K runs stacked was 1.35x slower than K lone ones (cola's 1043
        sentences, K = 5; bench/fused_speed.py): batched products (``baddbmm``) run below MKL's single products,
        and K-times larger temporaries go past glibc's mmap threshold, so each is page-faulted in afresh. The
        lone runs' evaluation is near the CPU's matmul peak already, so stacking has nothing to win there.
        """
        stacked = self.weights
        self.weights = {name: w[run] if name.replace(".", "__") in self.stacked else w for name, w in stacked.items()}
        try:
            yield
        finally:
            self.weights = stacked

    # -- the forward pass ---------------------------------------------------------------------------------
    def logits(
        self,
        inputs: dict[str, torch.Tensor],
        start: int | None = None,
        hidden: torch.Tensor | None = None,
        dropout: RunDropout | None = None,
        quiet: int = 0,
    ) -> torch.Tensor:
        """Logits ``(K, B, labels)`` for ``inputs`` (each ``(R, B, L)``).

        ``hidden`` (``(R, B, L, H)``) is the output of the first ``start`` blocks (cached), else the embeddings
        run. ``dropout`` applies in train mode, except in the first ``quiet`` stages (the embeddings, then the
        blocks), which run without it as frozen modules in eval mode do (``frozen_dropout = "off"``).
        """
        mask = inputs["attention_mask"]
        additive = (1.0 - mask[:, :, None, None, :].float()) * torch.finfo(torch.float32).min
        if hidden is None:
            x = self._embed(inputs, dropout if quiet < 1 else None)
            start = 0
        else:
            x = hidden
        for i in range(start or 0, self.n_layers):
            x = self._layer(x, i, additive, dropout if i + 1 >= quiet else None)
        return self._head(x[:, :, 0], dropout)

    def _head(self, first: torch.Tensor, dropout: RunDropout | None) -> torch.Tensor:
        """The logits from the first token's hidden state, with the family's head and its dropouts in its order:
        BERT's pooler, dropout, classifier; RoBERTa's dropout, dense, tanh, dropout, out_proj."""
        p = self.config.classifier_dropout
        p = self.config.hidden_dropout_prob if p is None else p
        dense, out = _HEAD_PARAMS[self.family]
        x = first
        if self.family == "roberta" and dropout is not None:
            x = dropout(x, p, 0)
        x = torch.tanh(self._linear(x, dense))
        if dropout is not None:
            x = dropout(x, p, 0)
        return self._linear(x, out)

    def _embed(self, inputs: dict[str, torch.Tensor], dropout: RunDropout | None) -> torch.Tensor:
        ids = inputs["input_ids"]
        types = inputs.get("token_type_ids")
        if types is None:
            types = torch.zeros_like(ids)
        if self.family == "roberta":  # transformers' create_position_ids_from_input_ids: padding keeps its id
            pad = self.config.pad_token_id
            unpadded = ids.ne(pad).int()
            positions = (torch.cumsum(unpadded, dim=-1).type_as(unpadded) * unpadded).long() + pad
        else:
            positions = torch.arange(ids.shape[-1], device=ids.device).expand_as(ids)
        base = self.base + "embeddings."
        x = self._lookup(base + "word_embeddings.weight", ids) + self._lookup(
            base + "token_type_embeddings.weight", types
        )
        x = x + self._lookup(base + "position_embeddings.weight", positions)
        x = self._layer_norm(x, base + "LayerNorm")
        return x if dropout is None else dropout(x, self.config.hidden_dropout_prob, 1)

    def _layer(self, x: torch.Tensor, i: int, additive: torch.Tensor, dropout: RunDropout | None) -> torch.Tensor:
        base = f"{self.base}encoder.layer.{i}."
        p = self.config.hidden_dropout_prob
        attended = self._linear(self._attention(x, base, additive, dropout), base + "attention.output.dense")
        if dropout is not None:
            attended = dropout(attended, p, 1)
        h = self._layer_norm(attended + x, base + "attention.output.LayerNorm")
        out = self._linear(self.act(self._linear(h, base + "intermediate.dense")), base + "output.dense")
        if dropout is not None:
            out = dropout(out, p, 1)
        return self._layer_norm(out + h, base + "output.LayerNorm")

    def _attention(
        self, x: torch.Tensor, base: str, additive: torch.Tensor, dropout: RunDropout | None
    ) -> torch.Tensor:
        """Multi-head self-attention: ``(R, B, L, H)`` in, ``(K', B, L, H)`` out; eager where dropout draws."""
        q, k, v = (self._heads(self._linear(x, base + f"attention.self.{name}")) for name in ("query", "key", "value"))
        p = self.config.attention_probs_dropout_prob
        if dropout is None or p <= 0:
            # runs and batch as one batch dimension: SDPA's fused kernels (flash on a CPU, flash or
            # memory-efficient on a GPU) take 4-D inputs only, and 5-D ones fall back to its math path; under
            # autocast q is bf16, and SDPA wants the mask in its dtype
            runs, batch = q.shape[:2]
            mask = additive.to(q.dtype).expand(runs, *additive.shape[1:]).flatten(0, 1)
            flat = (t.flatten(0, 1) for t in (q, k, v))
            context = F.scaled_dot_product_attention(*flat, attn_mask=mask).unflatten(0, (runs, batch))
        else:
            # SDPA's kernels (the lone run's, flash or memory-efficient on a GPU) keep q.k, its softmax and, in
            # the backward pass, the gradient of the probabilities (dP, from which the softmax's backward
            # subtracts its row sums) in fp32 under bf16 autocast; an eager attention under autocast rounds each
            # of them to bf16. So the attention runs in fp32 here and only its output returns to q's dtype (a few
            # percent of a layer's FLOPs at MiniLM's lengths). Measured on an H100 (README, "fused training"):
            # it did not remove the 0.2-point SST-2 gap between fused and lone runs with dropout (-0.16 against
            # -0.19 points), and without dropout, where SDPA runs on both sides, the two match.
            dtype = q.dtype
            with torch.autocast(q.device.type, enabled=False):
                q, k, v = q.float(), k.float(), v.float()
                scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5) + additive
                context = torch.matmul(dropout(torch.softmax(scores, dim=-1), p, 2), v).to(dtype)
        runs, batch, _, length, _ = context.shape
        return context.transpose(2, 3).reshape(runs, batch, length, -1)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        runs, batch, length, width = x.shape
        return x.view(runs, batch, length, self.heads, width // self.heads).transpose(2, 3)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """``x @ W.T + b`` per run: one matrix product with a shared weight, a batched one with stacked weights."""
        weight, bias = self.weights[name + ".weight"], self.weights[name + ".bias"]
        if weight.dim() == 2:
            return F.linear(x, weight, bias)
        runs, k = x.shape[0], weight.shape[0]
        middle = x.shape[1:-1]
        flat = x.reshape(runs, math.prod(middle), x.shape[-1])
        if runs == k:
            out = torch.baddbmm(bias[:, None, :], flat, weight.transpose(1, 2))
        else:  # one input for every run (the validation set): one product with the K weights side by side
            wide = F.linear(flat[0], weight.reshape(-1, weight.shape[-1]), bias.reshape(-1))
            out = wide.view(flat.shape[1], k, -1).transpose(0, 1)
        return out.reshape(k, *middle, -1)

    def _layer_norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        weight, bias = self.weights[name + ".weight"], self.weights[name + ".bias"]
        eps = self.config.layer_norm_eps
        if weight.dim() == 1:
            return F.layer_norm(x, weight.shape, weight, bias, eps)
        shape = (weight.shape[0],) + (1,) * (x.dim() - 2) + (weight.shape[-1],)
        return F.layer_norm(x, weight.shape[-1:], None, None, eps) * weight.view(shape) + bias.view(shape)

    def _lookup(self, name: str, ids: torch.Tensor) -> torch.Tensor:
        """Embedding rows: ``ids`` ``(R, B, L)`` into a shared table, or each run's ids into its own table."""
        table = self.weights[name]
        if table.dim() == 2:
            return F.embedding(ids, table)
        k, rows = table.shape[0], table.shape[1]
        ids = ids.expand(k, *ids.shape[1:])
        offsets = (torch.arange(k, device=ids.device) * rows).view(k, *([1] * (ids.dim() - 1)))
        return F.embedding(ids + offsets, table.reshape(k * rows, -1))
