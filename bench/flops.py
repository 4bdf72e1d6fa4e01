"""How far from the machine's limit: FLOPs of an encoder's training steps and evaluations, and the matmul peak.

Used by ``bench/speed.py`` (which counts the padded tokens of every batch that ran, times training and
evaluation apart, and prints achieved FLOP/s and utilisation); no run of its own. The formula, for a
BERT-style encoder of ``L`` layers, hidden width ``d``, feed-forward width ``f``, a head of ``C`` labels,
counting only the matrix products (2 FLOPs per multiply-add; layer norms, softmax, GELU, dropout, the
embedding lookups and the optimizer are elementwise and left out, a few per cent at these sizes):

* one layer's forward, per batch of ``b`` sequences padded to length ``s`` (padded positions are computed
  too, so ``s`` is the batch's padded length)::

      b*s * 2*(4*d^2 + 2*d*f)      Q, K, V and output projections (4 d x d), feed-forward (d x f, f x d)
    + b*s^2 * 4*d                  attention scores Q K^T and the weighted sum P V (2*s*d each, per token)

  which is ``2 x (parameters in matmuls) x tokens + 4*L*s*d per token`` over the ``L`` layers;
  MiniLM-L6 (d = 384, f = 1536): 3.54 MFLOP per token and layer plus 1536*s, about 21 MFLOP per token
  for the six layers at s ~ 30.
* the head, per sequence: pooler ``2*d^2`` and classifier ``2*d*C``.
* backward of a trainable layer = 2 x its forward (one product for the gradient of the input, one for
  the weights' gradient; the attention products have two inputs and no weights: 2 x as well). Freezing
  is a prefix here (embeddings, then layers 1..k), so frozen layers sit below every trainable one: they
  need no backward at all, not even the activation gradient, and the lowest trainable layer needs no
  input gradient for its Q/K/V projections when what it reads is frozen (``- b*s*6*d^2``). With
  ``frozen = 0`` the embeddings train, but their gradient is a scatter-add, no matmul. The head always
  trains (its pooler's input gradient is dropped when ``frozen = L``).

So, per frozen depth ``k`` (``t = L - max(k, 0)`` trainable layers, ``F`` = one layer's forward)::

    training step  = L*F + head  +  2*t*F - [k != 0 and t > 0] * b*s*6*d^2 + 2*head - [t == 0] * b*2*d^2
    evaluation     = (L - j)*F + head,  j = the layers served from the frozen-prefix cache (0 without it)

The matmul peak is measured in the same run (:func:`matmul_peak`): ``torch.matmul`` of square and
MiniLM-shaped matrices at each precision, with the run's thread count, best sustained GFLOP/s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

COUNT_KEYS = ("batches", "seqs", "tokens", "tokens_sq", "real_tokens")
# (m, k, n) of C[m,n] = A[m,k] @ B[k,n]: squares, then a MiniLM-shaped pair (512 tokens through d->f, f->d)
PEAK_SHAPES = ((384, 384, 384), (1536, 1536, 1536), (4096, 4096, 4096), (512, 384, 1536), (512, 1536, 384))


@dataclass(frozen=True)
class Dims:
    layers: int
    hidden: int
    intermediate: int
    num_labels: int = 2

    @classmethod
    def of_model(cls, name: str, num_labels: int = 2) -> Dims:
        from freezestats.encoder.backbone import load_model_config

        config = load_model_config(name)
        return cls(config.num_hidden_layers, config.hidden_size, config.intermediate_size, num_labels)

    def as_dict(self) -> dict:
        return asdict(self)


# -- token counts: one dict per kind of work, summed over batches ----------------------------------------


def empty_counts() -> dict[str, int]:
    return dict.fromkeys(COUNT_KEYS, 0)


def add_batch(counts: dict[str, int], seqs: int, length: int, real_tokens: int) -> dict[str, int]:
    """Count one batch of ``seqs`` sequences padded to ``length`` (``real_tokens`` without the padding)."""
    counts["batches"] += 1
    counts["seqs"] += seqs
    counts["tokens"] += seqs * length
    counts["tokens_sq"] += seqs * length * length
    counts["real_tokens"] += real_tokens
    return counts


def add_inputs(counts: dict[str, int], inputs: dict) -> dict[str, int]:
    """Count a tokenized batch (``input_ids`` [b, s], optional ``attention_mask``)."""
    ids = inputs["input_ids"]
    seqs, length = int(ids.shape[0]), int(ids.shape[1])
    mask = inputs.get("attention_mask")
    real = int(mask.sum()) if mask is not None else seqs * length
    return add_batch(counts, seqs, length, real)


def merge(*parts: dict[str, int]) -> dict[str, int]:
    total = empty_counts()
    for part in parts:
        for key in COUNT_KEYS:
            total[key] += int(part.get(key, 0))
    return total


# -- FLOPs --------------------------------------------------------------------------------------------


def layer_forward(counts: dict[str, int], dims: Dims) -> float:
    d, f = dims.hidden, dims.intermediate
    return counts["tokens"] * 2.0 * (4 * d * d + 2 * d * f) + counts["tokens_sq"] * 4.0 * d


def head_forward(counts: dict[str, int], dims: Dims) -> float:
    d = dims.hidden
    return counts["seqs"] * (2.0 * d * d + 2.0 * d * dims.num_labels)


def forward_flops(
    counts: dict[str, int], dims: Dims, start: int = 0, end: int | None = None, head: bool = True
) -> float:
    """Layers ``start`` .. ``end`` (0 = from the embeddings' output) and, with ``head``, the head."""
    end = dims.layers if end is None else end
    return (end - start) * layer_forward(counts, dims) + (head_forward(counts, dims) if head else 0.0)


def backward_flops(counts: dict[str, int], dims: Dims, frozen: int) -> float:
    d = dims.hidden
    trainable = dims.layers - max(frozen, 0)
    flops = 2.0 * trainable * layer_forward(counts, dims) + 2.0 * head_forward(counts, dims)
    if trainable > 0 and frozen != 0:
        flops -= counts["tokens"] * 6.0 * d * d  # the lowest trainable layer reads a frozen input
    if trainable == 0:
        flops -= counts["seqs"] * 2.0 * d * d  # nothing below the pooler needs its input gradient
    return flops


def train_flops(counts: dict[str, int], dims: Dims, frozen: int, forward_from: int = 0) -> float:
    """Training steps: forward (from layer ``forward_from`` when frozen outputs are cached) and backward."""
    return forward_flops(counts, dims, forward_from) + backward_flops(counts, dims, frozen)


def per_token_table(dims: Dims, frozen_levels: Iterable[int], length: float) -> list[dict]:
    """MFLOP per (padded) token at padded length ``length``, per frozen depth, for the report."""
    one = {"batches": 1, "seqs": 1, "tokens": length, "tokens_sq": length * length, "real_tokens": length}
    rows = []
    for frozen in frozen_levels:
        depth = max(frozen, 0)
        rows.append(
            {
                "frozen": frozen,
                "forward": forward_flops(one, dims) / length / 1e6,
                "backward": backward_flops(one, dims, frozen) / length / 1e6,
                "train_step": train_flops(one, dims, frozen) / length / 1e6,
                "eval_full": forward_flops(one, dims) / length / 1e6,
                "eval_cached": forward_flops(one, dims, depth) / length / 1e6,
            }
        )
    return rows


# -- the machine --------------------------------------------------------------------------------------


def _first_cpu_info() -> dict[str, str]:
    """The first processor's block of ``/proc/cpuinfo`` (empty where there is none)."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
    except OSError:
        pass
    return info


def cpu_name(info: dict[str, str] | None = None) -> str:
    """The CPU's model name with its family and model (``/proc/cpuinfo``; ``platform`` where that is missing,
    whose ``processor()`` is empty on Linux). Needs no torch, so the statistics benches name their CPU too."""
    import platform

    info = _first_cpu_info() if info is None else info
    name = info.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in info:
        name += f" (family {info['cpu family']}, model {info.get('model', '?')})"
    return name


def cpu_description() -> dict:
    """The CPU's name (``/proc/cpuinfo``, else ``platform``), its bf16 instructions and torch's threads."""
    import torch

    from freezestats.training import cpu_has_native_bf16

    info = _first_cpu_info()
    flags = set(info.get("flags", "").split())
    name = cpu_name(info)
    return {
        "name": name,
        "logical_cpus": os.cpu_count(),
        "native_bf16": cpu_has_native_bf16(),
        "bf16_flags": sorted(flags & {"avx512_bf16", "amx_bf16", "amx_tile", "avx512f", "avx2"}),
        "torch_cpu_capability": getattr(torch.backends.cpu, "get_cpu_capability", lambda: "?")(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def describe(cpu: dict) -> str:
    bf16 = "with bf16 instructions" if cpu.get("native_bf16") else "without bf16 instructions"
    flags = "/".join(f for f in cpu.get("bf16_flags", []) if "bf16" in f)
    capability = cpu.get("torch_cpu_capability", "?")
    return (
        f"CPU {cpu.get('name', '?')}, {cpu.get('logical_cpus', '?')} logical CPUs, {bf16}"
        f"{' (' + flags + ')' if flags else ''}; torch {cpu.get('torch', '?')} ({capability}),"
        f" {cpu.get('torch_threads', '?')} threads" + (f"; GPU {cpu['cuda']}" if cpu.get("cuda") else "; no GPU")
    )


def matmul_peak(
    threads: int,
    precisions: Sequence[str] = ("fp32", "bf16"),
    shapes: Sequence[tuple[int, int, int]] = PEAK_SHAPES,
    min_seconds: float = 1.0,
    device: str = "cpu",
) -> dict[str, dict]:
    """Best sustained GFLOP/s of ``torch.matmul`` per precision, with ``threads`` intra-op threads (on a CPU;
    on a GPU, ``device="cuda"``, the products run there, timed after synchronising).

    Each shape is warmed up once, then multiplied repeatedly for at least ``min_seconds`` (and at least
    twice); its rate is 2*m*k*n per product over the elapsed time. The peak is the best shape's rate.
    """
    import torch

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    result: dict[str, dict] = {}
    try:
        for precision in precisions:
            dtype = dtypes[precision]
            by_shape = {}
            for m, k, n in shapes:
                a = torch.randn(m, k, device=device).to(dtype)
                b = torch.randn(k, n, device=device).to(dtype)
                torch.matmul(a, b)  # warm-up: kernel selection, page faults
                sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
                sync()
                reps, started = 0, time.perf_counter()
                while True:
                    torch.matmul(a, b)
                    sync()
                    reps += 1
                    elapsed = time.perf_counter() - started
                    if elapsed >= min_seconds and reps >= 2:
                        break
                by_shape[f"{m}x{k}x{n}"] = 2.0 * m * k * n * reps / elapsed / 1e9
            best = max(by_shape, key=by_shape.__getitem__)
            result[precision] = {"gflops": by_shape[best], "best_shape": best, "by_shape": by_shape}
    finally:
        torch.set_num_threads(before)
    return {"threads": threads, "min_seconds": min_seconds, "device": device, "precisions": result}


def best_peak(peaks: Sequence[dict], precision: str) -> float | None:
    """The highest rate any of the measurements (e.g. before and after the parts) found at ``precision``."""
    rates = [p["precisions"][precision]["gflops"] for p in peaks if precision in p.get("precisions", {})]
    return max(rates) if rates else None
