"""The evaluation items' share of the uncertainty: jackknife pseudo-values per item (``pseudo_values``) and the
non-inferiority sequence with item variance added (``uncertainty``).
"""
