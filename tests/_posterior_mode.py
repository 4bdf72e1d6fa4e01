"""The posterior mode and inverse Hessian of a logistic model with a Gaussian prior, by Newton's method: the
importance sampler's starting proposal in the tests of the joint failure-rate draws, computed independently of
the package's Laplace fit."""

from __future__ import annotations

import numpy as np
from scipy import special


def laplace_mode(design: np.ndarray, failed: np.ndarray, runs: np.ndarray, precision: np.ndarray) -> tuple:
    """``(theta, Cov)`` at the mode of the binomial likelihood times a normal prior of diagonal ``precision``."""
    theta = np.zeros(design.shape[1])
    for _ in range(100):
        p = special.expit(design @ theta)
        hessian = design.T @ ((runs * p * (1 - p))[:, None] * design) + np.diag(precision)
        step = np.linalg.solve(hessian, design.T @ (failed - runs * p) - precision * theta)
        theta = theta + step
        if np.abs(step).max() < 1e-12:
            break
    return theta, np.linalg.inv(hessian)
