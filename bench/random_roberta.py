"""Write a randomly initialised RoBERTa-base (roberta-base's configuration) to a folder, for timing on a machine
that cannot download the real weights (issue 31's lent GPU reaches no hub).

The FLOPs, the memory and the kernels of a training step are those of roberta-base: the same layers, widths,
heads and vocabulary size. What differs: the weights are random (runs then learn little, so only times and
memory mean anything), and the tokenizer is the packaged MiniLM's (BERT WordPiece; roberta-base's BPE files are
not shipped offline), so sequence lengths differ a little from roberta-base's and the padding id is WordPiece's.

    python bench/random_roberta.py /tmp/roberta-base-random
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(folder: Path) -> None:
    import torch
    from transformers import AutoTokenizer, RobertaConfig, RobertaModel

    from freezestats.encoder.backbone import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model("minilm-l6"))
    config = RobertaConfig(  # roberta-base's config.json, but for the padding id (the tokenizer's)
        vocab_size=50265,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = RobertaModel(config, add_pooling_layer=False)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    print(f"random roberta-base ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters) at {folder}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
