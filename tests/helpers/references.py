"""Independent references for the tests: float64 central finite differences."""
from __future__ import annotations

from typing import Callable

import numpy as np


def central_differences(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, rel_step: float = 1e-6) -> np.ndarray:
    """Jacobian of ``f: [N, n] -> [N, *out]`` by float64 central differences: ``[N, *out, n]``.

    The step ``h = rel_step * max(1, |x_j|)`` balances truncation (O(h^2)) and round-off (O(eps/h)) errors.
    """
    x = np.asarray(x, dtype=np.float64)
    columns = []
    for j in range(x.shape[1]):
        h = rel_step * np.maximum(1.0, np.abs(x[:, j]))
        up, down = x.copy(), x.copy()
        up[:, j] += h
        down[:, j] -= h
        diff = (np.asarray(f(up), np.float64) - np.asarray(f(down), np.float64))
        columns.append(diff / (2 * h).reshape(-1, *([1] * (diff.ndim - 1))))
    return np.stack(columns, axis=-1)
