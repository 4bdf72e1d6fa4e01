"""Do the fused trainer's dropout masks on a GPU keep and scale as torch's own do? (one short device command)

On CUDA a fused run draws its masks from its own generator (``RunDropout``), the lone run from the global one
inside ``F.dropout`` and SDPA's kernel. Either could be biased without any test on a CPU seeing it. This
prints, on the device: the mean of dropout applied to ones (1.0 when unbiased: keep share times scale), the
keep share, the lag-one correlation of one generator's successive masks, and the relative bias of attention
averaged over many dropout draws (eager with ``RunDropout`` and SDPA's fused kernel) against attention without
dropout.

    python bench/gpu_dropout_check.py [--draws 400]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from freezestats.training.fused._stacked import RunDropout


def _ones_check(device: str, dtype: torch.dtype, p: float) -> None:
    generators = [torch.Generator(device=device).manual_seed(seed) for seed in range(5)]
    dropout = RunDropout(generators, [64] * 5)
    x = torch.ones(5, 16, 64, 384, device=device, dtype=dtype)
    fused = dropout(x, p, 1).float()
    lone = F.dropout(x, p, training=True).float()
    again = dropout(x, p, 1).float()
    lag = torch.corrcoef(torch.stack([(fused != 0).flatten().float(), (again != 0).flatten().float()]))[0, 1]
    for name, out in (("RunDropout", fused), ("F.dropout", lone)):
        print(
            f"  {dtype}: {name:10s} mean {out.mean().item():.5f}  keep {(out != 0).float().mean().item():.5f}"
            f"  scale {out[out != 0].mean().item():.6f}"
        )
    print(f"  {dtype}: RunDropout lag-one mask correlation {lag.item():+.4f}")


def _attention_check(device: str, dtype: torch.dtype, p: float, draws: int) -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 16, 12, 64, 32, device=device, dtype=dtype) for _ in range(3))
    mask = torch.zeros(1, 16, 1, 1, 64, device=device)
    mask[..., 50:] = torch.finfo(torch.float32).min
    exact = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
    dropout = RunDropout([torch.Generator(device=device).manual_seed(1)], [64])
    eager = torch.zeros_like(exact)
    kernel = torch.zeros_like(exact)
    for _ in range(draws):
        scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * 32**-0.5 + mask
        probs = dropout(torch.softmax(scores, dim=-1), p, 2)
        eager += torch.matmul(probs.to(dtype), v).float() / draws
        drawn = F.scaled_dot_product_attention(q[0], k[0], v[0], attn_mask=mask[0].to(dtype), dropout_p=p)
        kernel += drawn[None].float() / draws
    scale = exact.abs().mean().item()
    for name, mean in (("eager RunDropout", eager), ("SDPA dropout_p", kernel)):
        print(
            f"  {dtype}: {name:16s} mean output - exact: {(mean - exact).mean().item() / scale:+.5f} of |exact|,"
            f" mean |diff| {(mean - exact).abs().mean().item() / scale:.4f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"dropout check on {name}, torch {torch.__version__}, p = 0.1")
    for dtype in (torch.float32, torch.bfloat16):
        _ones_check(args.device, dtype, 0.1)
        _attention_check(args.device, dtype, 0.1, args.draws)


if __name__ == "__main__":
    main()
