"""Simulated studies with known truths, for the coverage benches and tests: results tables (``results``),
studies with per-item predictions (``items``), both drawn from the additive seed model the mixed-model
analysis assumed, and studies that behave like real fine-tuning runs instead (``realistic``: a finite
evaluation set drawn from an item population, depths that disagree item by item, depth-specific run SDs and
seed correlations, collapsed runs), whose truths speak of the task.
"""
