"""Covariance matrices given by a user, checked once: shape, finite entries, symmetry, positive definiteness.

Every covariance the library takes (a calibration's observation ``cov`` and ``prior_cov``, a propagation's input
``covariance``) passes :func:`checked_covariance`, so all of them are refused by the same rule and with the same
one-line message naming the argument. Symmetry is judged to a relative ``1e-10`` of the largest entry (rounding
in a matrix written out as text or computed as ``A A^T``), and the symmetric part is what is returned and
factored. Positive definiteness is a Cholesky factorisation (LAPACK ``dpotrf``), whose failure names the first
row that breaks it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from sensitivity.errors import ConfigError, SensitivityError
from sensitivity.runtime.lazy import lazy_import

linalg = lazy_import("scipy.linalg")


def checked_covariance(matrix: Any, n: int, what: str, *, labels: Sequence[str] | None = None,
                       error: type[SensitivityError] = ConfigError) -> tuple[np.ndarray, np.ndarray]:
    """``matrix`` as a symmetric positive definite ``[n, n]`` float64 array, and its lower Cholesky factor.

    Parameters
    ----------
    matrix
        The covariance, ``[n, n]`` [units_i * units_j].
    n
        Its expected size.
    what
        How the messages name it (e.g. ``"`cov` on the observed outputs"``).
    labels
        ``[n]`` names of the rows for the messages (e.g. ``"output 'y3'"``); default: indices.
    error
        The exception to raise: :class:`~sensitivity.errors.ConfigError` for an argument,
        :class:`~sensitivity.errors.DataError` for a matrix read from a file.

    Returns
    -------
    covariance, cholesky
        ``C = (M + M^T) / 2`` and the lower triangular ``L`` with ``L L^T = C``.
    """
    c = np.asarray(matrix, dtype=float)
    if c.shape != (n, n):
        raise error(f"{what} must have shape [{n}, {n}], got {list(c.shape)}")
    bad = ~np.isfinite(c)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        at = f"at ({i}, {j})" if labels is None else f"at {labels[i]}, {labels[j]}"
        raise error(f"{what} must be finite, got {c[i, j]} {at}")
    if not np.allclose(c, c.T, rtol=1e-10, atol=1e-12 * np.abs(c).max()):
        raise error(f"{what} must be symmetric, got max |C - C^T| = {np.abs(c - c.T).max():.3g}")
    c = 0.5 * (c + c.T)
    chol, info = linalg.lapack.dpotrf(c, lower=True, clean=True)
    if info != 0:
        row = f" (fails at {labels[info - 1]})" if labels is not None and info > 0 else ""
        raise error(f"{what} must be positive definite, got smallest eigenvalue {np.linalg.eigvalsh(c).min():.3g}{row}")
    return c, chol
