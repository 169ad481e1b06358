"""The one covariance check: the symmetric part and its Cholesky factor, or a one-line error naming the matrix."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.inputs.covariance import checked_covariance
from sensitivity.errors import ConfigError, DataError

LABELS = ["parameter 'a'", "parameter 'b'", "parameter 'c'"]


def test_returns_the_symmetric_part_and_its_cholesky_factor():
    # L = [[2, 0, 0], [1, 3, 0], [0.5, -1, 1]] by hand; C = L L^T written out, with a rounding-sized asymmetry.
    chol = np.array([[2.0, 0.0, 0.0], [1.0, 3.0, 0.0], [0.5, -1.0, 1.0]])
    c = np.array([[4.0, 2.0, 1.0], [2.0, 10.0, -2.5], [1.0, -2.5, 2.25]])
    nudged = c.copy()
    nudged[0, 1] *= 1.0 + 1e-13
    sym, factor = checked_covariance(nudged, 3, "`covariance`")
    np.testing.assert_array_equal(sym, sym.T)
    np.testing.assert_allclose(sym, c, rtol=1e-12)
    np.testing.assert_allclose(factor, chol, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("matrix, labels, error, message", [
    (np.eye(2), None, ConfigError, r"^`prior_cov` must have shape \[3, 3\], got \[2, 2\]$"),
    ([[1.0, 0.0, 0.0], [0.0, np.nan, 0.0], [0.0, 0.0, 1.0]], LABELS, ConfigError,
     r"^`prior_cov` must be finite, got nan at parameter 'b', parameter 'b'$"),
    ([[1.0, 0.0, np.inf], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], None, ConfigError,
     r"^`prior_cov` must be finite, got inf at \(0, 2\)$"),
    ([[1.0, 0.1, 0.0], [0.2, 1.0, 0.0], [0.0, 0.0, 1.0]], None, DataError,
     r"^`prior_cov` must be symmetric, got max \|C - C\^T\| = 0.1$"),
    # [[1, 2], [2, 1]] has eigenvalues 3 and -1; its Cholesky factorisation breaks at the second row.
    ([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], LABELS, DataError,
     r"^`prior_cov` must be positive definite, got smallest eigenvalue -1 \(fails at parameter 'b'\)$"),
])
def test_bad_matrices_fail_with_one_line_naming_the_matrix(matrix, labels, error, message):
    with pytest.raises(error, match=message):
        checked_covariance(matrix, 3, "`prior_cov`", labels=labels, error=error)
