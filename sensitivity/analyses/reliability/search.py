"""Where FORM starts: random directions on a sphere, and the search for the design points the starts missed.

:func:`sphere_starts` gives the first starts of every event; :func:`search_starts` the starts of one search round
per event, on the sphere of its smallest ``beta`` in the directions farthest from every design point found, and
:func:`found_new` whether a round found a new one (:func:`~sensitivity.analyses.reliability.form.form` runs them).

References
----------
Der Kiureghian, A. & Dakessian, T. (1998), Multiple design points in first and second-order reliability,
Structural Safety 20(1), 37-49, doi:10.1016/S0167-4730(97)00026-X.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sensitivity.analyses.reliability._checks import positive, positive_int


def sphere_starts(n: int, count: int, *, radius: float = 1.0, origin: bool = True,
                  seed: int | np.random.Generator | None = None) -> np.ndarray:
    """``[count, n]`` starts: the origin (where ``origin``) and random directions at ``radius`` [standard units].

    Directions come in antipodal pairs, so a symmetric problem is started on both sides.
    """
    positive_int("n", n)
    positive_int("count", count)
    positive("radius", radius)
    rng = np.random.default_rng(seed)
    k = count - int(origin)
    halves = rng.standard_normal(((k + 1) // 2, n))
    halves /= np.linalg.norm(halves, axis=1, keepdims=True)
    directions = np.stack([halves, -halves], axis=1).reshape(-1, n)[:k]
    out = radius * directions
    if origin:
        out = np.concatenate([np.zeros((1, n)), out])
    return out


def search_starts(beta: np.ndarray, alpha: np.ndarray, searching: np.ndarray, settings: Any,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The events to search again and their starts ``[P, search_starts, n]``.

    An event is searched while its last round found a new design point and its smallest ``beta`` is positive.
    Its starts lie on the sphere of that radius (where the other design points that matter lie, within
    ``beta_margin``), in the directions farthest from every design point found so far: greedily, from a pool of
    ``max(64, 16 n)`` random directions, the one whose largest cosine to the found ``alpha`` and to the
    directions already picked is smallest (a maximin design on the sphere). Where the search of a point left the
    other points' basins unvisited, these starts land in them (Der Kiureghian & Dakessian 1998 keep the search
    off the found points by bulges of ``g`` instead; on the sphere the limit state is left unchanged, so no
    spurious point on a bulge's rim needs discarding).
    """
    with np.errstate(invalid="ignore"):
        smallest = np.nanmin(np.where(np.isfinite(beta), beta, np.inf), axis=1)
    picked = np.flatnonzero(searching & np.isfinite(smallest) & (smallest > 0))
    n = alpha.shape[-1]
    out = np.empty((len(picked), settings.search_starts, n))
    pool = max(64, 16 * n)
    for row, event in enumerate(picked):
        directions = list(alpha[event][np.isfinite(beta[event])])
        candidates = rng.standard_normal((pool, n))
        candidates /= np.linalg.norm(candidates, axis=1, keepdims=True)
        for k in range(settings.search_starts):
            best = int(np.argmin(np.max(candidates @ np.asarray(directions).T, axis=1)))
            out[row, k] = smallest[event] * candidates[best]
            directions.append(candidates[best])
    return picked, out


def found_new(beta: np.ndarray, alpha: np.ndarray, new_beta: np.ndarray, new_alpha: np.ndarray,
               settings: Any) -> np.ndarray:
    """``[E]``: whether a round's converged starts found a design point distinct from every one before (cosine of
    their ``alpha`` below ``cluster_cosine``) within ``beta_margin`` of the smallest ``beta``."""
    with np.errstate(invalid="ignore"):
        smallest = np.fmin(np.nanmin(np.where(np.isfinite(beta), beta, np.inf), axis=1),
                           np.nanmin(np.where(np.isfinite(new_beta), new_beta, np.inf), axis=1))
    cos = np.einsum("esn,ekn->esk", np.nan_to_num(new_alpha), np.nan_to_num(alpha))
    cos = np.where(np.isfinite(beta)[:, None, :], cos, -np.inf).max(axis=2, initial=-np.inf)
    distinct = np.isfinite(new_beta) & (cos < settings.cluster_cosine) & \
        (new_beta <= smallest[:, None] + settings.beta_margin)
    return distinct.any(axis=1)
