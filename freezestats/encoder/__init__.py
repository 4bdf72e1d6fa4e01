"""The pretrained encoder (stage 4): loading a backbone, freezing a prefix, the frozen-prefix cache, pair encoding.

Everything here acts on a loaded transformers model and knows nothing of studies or training loops.
"""
