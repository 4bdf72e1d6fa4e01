"""Simulated studies with known truths, for the coverage benches and tests: results tables (``results``) and
studies with per-item predictions (``items``).
"""
