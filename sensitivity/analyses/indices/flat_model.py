"""A compiled surrogate seen by the sensitivity methods (:mod:`~sensitivity.analyses.indices.methods`) through one
flat output axis, refused where the model is not finite on a design."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sensitivity.analyses.indices.dgsm_sweep import SHOWN, named_points
from sensitivity.errors import DataError
from sensitivity.outputs.spec import OutputSpec

if TYPE_CHECKING:
    from sensitivity.engine.jacobian import CompiledJacobian


@dataclass(frozen=True)
class FlatModel:
    """A compiled surrogate seen through one flat output axis: values ``[N, m]``, Jacobians ``[N, m, n]``."""

    engine: CompiledJacobian

    @property
    def spec(self) -> OutputSpec:
        """The model's own output description (names, dims, units)."""
        return self.engine.surrogate.output

    @property
    def identity(self) -> str:
        """The surrogate's content hash: what a one-pass analysis's kept statistics record as their model."""
        return str(getattr(self.engine.surrogate, "content_hash", "") or "")

    @property
    def labels(self) -> dict[str, list[str]]:
        """``output_names`` and ``output_units`` of the flat outputs, for the analyses."""
        return {"output_names": self.spec.flat_names(), "output_units": self.spec.flat_units()}

    def values(self, points: np.ndarray) -> np.ndarray:
        """Values only (the compiled values function): ``[N, m]``; refused where not finite (:meth:`finite`)."""
        values = self.engine.values(points).reshape(len(points), -1)
        return self.finite(points, np.isfinite(values).all(axis=1), values)

    def jacobian(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values ``[N, m]`` and exact Jacobians ``[N, m, n]`` in physical units; refused where not finite."""
        values, jac = self.engine(points)
        values, jac = values.reshape(len(points), -1), jac.reshape(len(points), -1, jac.shape[-1])
        return self.finite(points, np.isfinite(values).all(axis=1) & np.isfinite(jac).all(axis=(1, 2)), values), jac

    def finite(self, points: np.ndarray, ok: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``values``, or a one-line :class:`DataError` saying at how many of the design's points and where the
        model is not finite: the estimators on a design (pick-freeze matrices, trajectories, replicates) need
        every point of it, and one NaN would make every index NaN."""
        if ok.all():
            return values
        first = named_points(self.engine.surrogate.input_names, np.asarray(points)[~ok][:SHOWN])
        raise DataError(f"the model is not finite at {int((~ok).sum())} of {len(ok)} points of the design (first "
                        f"at {first}); these indices need the model at every point: make it finite over the space, or "
                        "narrow the space's bounds")
