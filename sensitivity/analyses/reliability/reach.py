"""Whether design points lie within the reach of the data a surrogate was trained on.

A surrogate's answer at a design point is an extrapolation when the point lies outside the box of its training
inputs, or farther from every training input than any training input is from its nearest neighbour (distances in
coordinates scaled by the box's widths): the members of an ensemble may agree there, but none of them saw data
near it. Without a record of the training inputs the answer is ``UNKNOWN``, not "within". The rule is
deliberately plain: it flags clear extrapolation (a tail the training design did not sample); a point within reach
is not thereby accurate (``verify`` checks it against the simulator).
"""
from __future__ import annotations

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

spatial = lazy_import("scipy.spatial")

UNKNOWN, WITHIN, BEYOND = -1, 0, 1
#: CF flag meanings of :func:`training_reach`.
REACH_FLAGS = {UNKNOWN: "unknown", WITHIN: "within_training_data", BEYOND: "beyond_training_data"}


def training_reach(points: np.ndarray, training: np.ndarray | None) -> np.ndarray:
    """``[...]`` int8 flags of ``points [..., n]`` (physical units): ``BEYOND``, ``WITHIN`` or ``UNKNOWN``.

    Parameters
    ----------
    points
        Design points in the physical space; rows with NaN (no design point) get ``UNKNOWN``.
    training
        ``[N, n]`` the surrogate's training inputs, in the same parameter order and units, or None.
    """
    points = np.asarray(points, dtype=float)
    flags = np.full(points.shape[:-1], UNKNOWN, dtype=np.int8)
    if training is None:
        return flags
    x = np.asarray(training, dtype=float)
    if x.ndim != 2 or x.shape[1] != points.shape[-1] or len(x) < 2 or not np.all(np.isfinite(x)):
        raise ConfigError(f"the training inputs must be a finite [N >= 2, {points.shape[-1]}] array, got shape "
                          f"{x.shape}")
    low, high = x.min(axis=0), x.max(axis=0)
    width = np.where(high > low, high - low, 1.0)
    tree = spatial.cKDTree((x - low) / width)
    reach = float(tree.query((x - low) / width, k=2)[0][:, 1].max())
    flat = points.reshape(-1, points.shape[-1])
    ok = np.all(np.isfinite(flat), axis=1)
    scaled = (flat[ok] - low) / width
    outside = np.any((scaled < -1e-9) | (scaled > 1 + 1e-9), axis=1)
    far = tree.query(scaled, k=1)[0] > reach
    out = flags.reshape(-1)
    out[ok] = np.where(outside | far, BEYOND, WITHIN)
    return out.reshape(flags.shape)
