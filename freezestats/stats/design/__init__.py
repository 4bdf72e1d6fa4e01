"""The input side of every model: the one check of a results table (``input_table``: what ``analyze`` accepts),
the per-analysis checks (``checks``) and the fixed-effects design and fit report the models share (``model_frame``).
"""
