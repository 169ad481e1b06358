"""Indices from a stored sweep: when a sweep's points are draws of the input distribution, its blocks, its sample.

A sweep grid maps its unit-cube design linearly onto the bounds, so a ``sobol``, ``halton``, ``lhs``
or ``random`` sweep is a sample of the independent uniform distribution on the bounds
(:func:`check_sweep_sample`); its Jacobians and values then feed
:func:`~sensitivity.analyses.indices.dgsm.analyze_blocks` block by block, streamed by
:class:`sensitivity.sweep.stored.StoredSweep` (:func:`sweep_blocks`), and its points and values
(:func:`sweep_sample`) the given-data indices of :mod:`~sensitivity.analyses.indices.given_data`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from sensitivity.analyses.indices.design import is_correlated
from sensitivity.datasets.settings import settings_of
from sensitivity.errors import DataError
from sensitivity.outputs.spec import OutputSpec
from sensitivity.inputs.space import ParameterSpace
from sensitivity.sweep.designs import GridDesign
from sensitivity.sweep.stored import StoredSweep

#: Grid kinds whose points are draws of a uniform distribution on the bounds (a sweep usable for DGSM).
SAMPLING_GRIDS: tuple[str, ...] = ("sobol", "halton", "lhs", "random")
#: Grid kinds whose points are independent across inputs point by point (i.i.d., or a Latin hypercube): the rank
#: estimator of the given-data indices needs them. A Sobol' or Halton net is not: points next to each other in
#: one input are correlated in the others (measured on Ishigami: errors of 0.1-0.5 against 0.02 at N = 8192).
RANK_GRIDS: tuple[str, ...] = ("lhs", "random")


def check_sweep_sample(sweep: StoredSweep, space: ParameterSpace, spec: OutputSpec,
                       surrogate_hash: str | None = None, *, method: str = "DGSM",
                       grids: tuple[str, ...] = SAMPLING_GRIDS) -> None:
    """Refuse a sweep whose points are not draws of ``space``'s input distribution, or of another model.

    A sweep grid maps its unit-cube design linearly onto the bounds (geometrically for
    ``scale: log``), so a ``sobol``, ``halton``, ``lhs`` or ``random`` grid samples the independent
    uniform distribution on the bounds: ``method`` (DGSM, the given-data indices) on it is that of
    ``space`` only when every parameter of ``space`` is uniform, on linear scale, on the same bounds
    as the sweep's, with no correlation matrix. ``grids`` are the grid kinds ``method`` accepts
    (:data:`RANK_GRIDS` for the given-data indices).

    Raises
    ------
    DataError
        Naming the file and what does not match.
    """
    path, attrs, names = sweep.path, sweep.attrs, list(sweep.parameter_names)
    sizes = dict(zip(sweep.output.dim_names, sweep.output.shape))
    if sweep.output.name != spec.name:
        raise DataError(f"{path}: no variable(s) {[spec.name]}: not a sweep of this model's output `{spec.name}`")
    if names != space.names:
        raise DataError(f"{path}: parameters {names} differ from the space's {space.names}")
    if sizes != dict(zip(spec.dim_names, spec.shape)):
        raise DataError(f"{path}: output dims {sizes} differ from the model's {dict(zip(spec.dim_names, spec.shape))}")
    if surrogate_hash and attrs.get("surrogate_hash") and attrs["surrogate_hash"] != surrogate_hash:
        raise DataError(f"{path}: computed with surrogate {attrs['surrogate_hash'][:19]}..., "
                        f"this model is {surrogate_hash[:19]}...")
    grid, swept = settings_of(sweep, GridDesign, where=path), settings_of(sweep, ParameterSpace, where=path)
    if grid.kind not in grids:
        what = ("a sample of the input distribution" if grid.kind not in SAMPLING_GRIDS else
                "an i.i.d. or Latin hypercube sample (neighbours in one input of a low-discrepancy net are correlated "
                "in the others)")
        raise DataError(f"{path}: a {grid.kind!r} grid is not {what}; {method} needs a sweep on one of {list(grids)}")
    if is_correlated(space) and (grid.through != "distribution" or not np.allclose(
            np.eye(len(space)) if swept.correlation is None else swept.correlation, space.correlation)):
        raise DataError(f"{path}: the sweep drew its inputs without the space's correlation matrix; {method} of a "
                        "correlated space needs a sweep with grid.through=distribution and that correlation")
    for p in space.parameters:
        rec = swept.parameters[swept.index(p.name)] if p.name in swept.names else None
        if rec is None or (rec.low, rec.high) != (p.low, p.high):
            raise DataError(f"{path}: the sweep's bounds of {p.name!r} ({None if rec is None else (rec.low, rec.high)})"
                            f" differ from the space's ({p.low}, {p.high})")
        if grid.through == "distribution":
            if rec.distribution != p.distribution:
                raise DataError(f"{path}: the sweep drew {p.name!r} from {rec.distribution.kind}, the space has "
                                f"{p.distribution.kind} {dict(p.distribution.params)}: not a sample of this space")
        elif not _uniform_on_bounds(p):
            raise DataError(f"{path}: parameter {p.name!r} is {p.distribution.kind} on {p.scale} scale, but the sweep's "
                            "grid samples uniformly on the bounds (sweep with grid.through=distribution)")


def _uniform_on_bounds(p) -> bool:
    """True when the parameter's distribution is uniform on its bounds, on a linear scale."""
    name, params = p.distribution.scipy_form(p.low, p.high)
    return (p.scale == "linear" and name == "uniform" and p.distribution.truncate is None
            and np.isclose(params.get("loc", 0.0), p.low) and np.isclose(params.get("scale", 1.0), p.high - p.low))


@dataclass
class NonFinite:
    """The points of a stored sweep left out because a value or a derivative there is not finite (a model that
    fails at some points): how many of how many, and the first few (``[k, n]``, at most :data:`SHOWN`)."""

    count: int = 0
    total: int = 0
    first: list[np.ndarray] = field(default_factory=list)

    def where(self, names: list[str]) -> str:
        """The first points left out, as ``a=0.1, b=2; ...``."""
        return named_points(names, self.first, more=self.count > len(self.first))


def named_points(names: list[str] | tuple[str, ...], points, *, more: bool = False) -> str:
    """Points ``[k, n]`` as ``a=0.1, b=2; a=0.3, b=1`` (``; ...`` appended when ``more``), for a message."""
    return "; ".join(", ".join(f"{n}={v:.6g}" for n, v in zip(names, p)) for p in points) + ("; ..." if more else "")


#: How many of the points left out a :class:`NonFinite` keeps, to name them.
SHOWN = 3


def sweep_blocks(sweep: StoredSweep, block: int = 65536,
                 nonfinite: NonFinite | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(jacobian [b, m, n], values [b, m])`` of a stored sweep, ``block`` points at a time (bounded memory).

    Refuses (:class:`DataError`) a sweep that does not match its checksum record before the first block. With
    ``nonfinite``, the points where a value or a derivative is not finite are left out and counted there (an
    estimator that is a mean over i.i.d. points, such as DGSM, stays unbiased for the region where the model is
    defined); without, they are yielded as stored.
    """
    sweep.verify()
    for blk in sweep.blocks(block, variables=["x", "jacobian", sweep.output.name]):
        x, values, jac = blk.flat(sweep.output)
        if nonfinite is not None:
            keep = np.isfinite(values).all(axis=1) & np.isfinite(jac).all(axis=(1, 2))
            nonfinite.total += len(keep)
            nonfinite.count += int((~keep).sum())
            nonfinite.first += list(np.asarray(x)[~keep][:SHOWN - len(nonfinite.first)])
            values, jac = values[keep], jac[keep]
        if len(values):
            yield jac, values
    if nonfinite is not None and nonfinite.count == nonfinite.total:
        raise DataError(f"{sweep.path}: no point of the sweep has finite values and derivatives (first: "
                        f"{nonfinite.where(list(sweep.parameter_names))})")


def sweep_sample(sweep: StoredSweep, block: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """Points ``[N, n]`` and values ``[N, m]`` (outputs flat in C order) of a whole stored sweep, ``block`` at a time.

    No Jacobians are read. Refuses (:class:`DataError`) a sweep that does not match its checksum record.
    """
    sweep.verify()
    spec = sweep.output
    points, values = [], []
    for blk in sweep.blocks(block, variables=["x", spec.name]):
        points.append(blk.data["x"].transpose("sample", "parameter").values)
        values.append(blk.data[spec.name].transpose("sample", *spec.dim_names).values.reshape(blk.stop - blk.start, -1))
    return np.concatenate(points), np.concatenate(values)
