"""Runs that collapse to the majority class: rates and flags (``rates``), the logistic trend over size and depth
(``trend``, with Firth's penalised fit in ``firth``), rates pooled across cells (``pooled_rates``) or following
their fall with train size within one depth pair (``slope_rates``) and the two-part
contrasts of the expected score (``two_part``).
"""
