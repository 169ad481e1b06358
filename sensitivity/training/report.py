"""The training samples and the validation report of a surrogate as one labeled dataset (training.nc)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from sensitivity.outputs.labels import parameter_coords, units_attrs
from sensitivity.outputs.members import MEMBER_MEAN, spread_variables
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.axes import own_coords
from sensitivity.outputs.spec import OutputSpec
from sensitivity.training.validation import NEGLIGIBLE_COLUMN, DerivativeErrors, ValueErrors

if TYPE_CHECKING:
    from sensitivity.training.fit import Split

xr = lazy_import("xarray")

#: Split labels stored in the ``subset`` variable (CF flag values 0, 1, 2).
SUBSETS = ("train", "validation", "test")


@dataclass(frozen=True)
class MemberReport:
    """How the members of an ensemble did, beside the ensemble mean's errors.

    ``rmse [K, *out]`` each member's test RMSE; ``spread [*out]`` the members' predictive standard deviation
    ``sqrt(1 + 1/K) s`` on the test samples (root mean square over them, after the calibration ``scale``), the
    ensemble's own estimate of its error, to read against the mean's ``rmse``; ``bootstrap_counts [K, N]`` how
    often each sample is in member ``k``'s training resample; ``scale [*out]`` the spread's calibration (1: none);
    ``predictions [K, T, *out]`` each member's (calibrated) prediction at the test samples ``test [T]`` (sample
    indices), whose spread the report gives at ``level`` (:func:`sensitivity.outputs.members.spread_variables`).
    """

    rmse: np.ndarray
    spread: np.ndarray
    bootstrap_counts: np.ndarray
    scale: np.ndarray
    predictions: np.ndarray
    test: np.ndarray
    level: float


def report_dataset(x: np.ndarray, y: np.ndarray, split: Split, *, names: Sequence[str], units: Sequence[str],
                   output: OutputSpec, values: ValueErrors, history: dict[str, np.ndarray],
                   derivatives: DerivativeErrors | None = None, check_samples: np.ndarray | None = None,
                   parameter_long_names: Sequence[str] | None = None,
                   members: MemberReport | None = None) -> xr.Dataset:
    """The training samples and the validation report as one labeled dataset.

    Variables: ``x(sample, parameter)``, ``<output.name>(sample, *out)``, ``subset(sample)``,
    ``rmse``/``max_error``/``r2`` over the test samples ``(*out)``, the training curves over ``epoch``
    (``(member, epoch)`` for an ensemble, NaN after a member stopped: ``history`` arrays ``[K, epochs]``)
    and, when derivatives were checked, ``jacobian_error(check)``, ``jacobian_column_error(check, parameter)``
    and ``jacobian_parameter_error(parameter)`` with ``check_sample(check)`` the samples checked. For an
    ensemble (``members``), the errors are the ensemble mean's, and ``member_rmse(member, *out)``,
    ``member_spread(*out)``, ``spread_scale(*out)`` and ``bootstrap_count(member, sample)`` are added, with the
    ensemble's prediction at the test samples ``prediction(test, *out)`` (``test_sample(test)`` their sample
    index) and beside it the members' variables of every study of an ensemble (``prediction_member``,
    ``prediction_surrogate_std``, ``prediction_combined_interval``: :func:`~sensitivity.outputs.members.spread_variables`).
    """
    out_dims = list(output.dim_names)
    unit_attrs = units_attrs(output.units, "output_units")
    n_epochs = np.shape(history["loss"])[-1]
    curve_dims = ("member", "epoch") if np.ndim(history["loss"]) == 2 else ("epoch",)
    coords: dict[str, Any] = {
        "sample": xr.Variable("sample", np.arange(len(x), dtype=np.int32), {"long_name": "sample index", "units": "1"}),
        "epoch": xr.Variable("epoch", np.arange(1, n_epochs + 1, dtype=np.int32), {"long_name": "training epoch",
                                                                                   "units": "1"}),
        **parameter_coords(names, units),
        **own_coords(output),
    }
    if parameter_long_names:
        coords["parameter_long_name"] = xr.Variable("parameter", np.asarray(parameter_long_names, dtype=object),
                                                    {"long_name": "parameter description"})
    data: dict[str, Any] = {
        "x": (("sample", "parameter"), np.asarray(x, float), {"long_name": "parameter value of the sample",
                                                              **units_attrs(units, "parameter_units")}),
        output.name: (("sample", *out_dims), np.asarray(y, float), {"long_name": f"simulated {output.long_name}",
                                                                   **unit_attrs}),
        "subset": ("sample", split.labels(len(x)), {"long_name": "use of the sample in training", "units": "1",
                                                    "flag_values": np.arange(3, dtype=np.int8),
                                                    "flag_meanings": " ".join(SUBSETS)}),
        "rmse": (out_dims, values.rmse, {"long_name": "root-mean-square error of the surrogate on the test samples",
                                         **unit_attrs}),
        "max_error": (out_dims, values.max_error, {"long_name": "largest absolute error on the test samples",
                                                   **unit_attrs}),
        "r2": (out_dims, values.r2, {"long_name": "coefficient of determination on the test samples", "units": "1"}),
    }
    for key, long_name in (("loss", "training loss (mean squared error of normalised outputs)"),
                           ("val_loss", "validation loss (mean squared error of normalised outputs)"),
                           ("learning_rate", "learning rate")):
        if key in history:
            data[key] = (curve_dims, history[key], {"long_name": long_name, "units": "1"})
    if members is not None:
        coords["member"] = xr.Variable("member", np.arange(len(members.rmse), dtype=np.int32),
                                       {"long_name": "member of the ensemble", "units": "1"})
        data.update(
            member_rmse=(("member", *out_dims), members.rmse,
                         {"long_name": "root-mean-square error of each member on the test samples", **unit_attrs}),
            member_spread=(out_dims, members.spread,
                           {"long_name": "predictive standard deviation sqrt(1 + 1/K) s of the members on the test "
                                         "samples (root mean square over them): the ensemble's estimate of its error",
                            **unit_attrs}),
            spread_scale=(out_dims, members.scale,
                          {"long_name": "factor the members' spread about their mean is scaled by (calibrated on the "
                                        "validation samples)", "units": "1"}),
            bootstrap_count=(("member", "sample"), members.bootstrap_counts.astype(np.int16),
                             {"long_name": "times the sample is in the member's training resample", "units": "1"}),
        )
        data.update(_test_predictions(members, out_dims, output.long_name, unit_attrs))
        coords["test_sample"] = xr.Variable("test", np.asarray(members.test, np.int32),
                                            {"long_name": "sample index of the test sample", "units": "1"})
    if derivatives is not None:
        coords["check"] = xr.Variable("check", np.arange(len(derivatives.per_point), dtype=np.int32),
                                      {"long_name": "index of a derivative check point", "units": "1"})
        note = "relative Frobenius error of the surrogate Jacobian against float64 central differences of the simulator"
        data.update(
            check_sample=("check", np.asarray(check_samples, np.int32), {"long_name": "sample checked", "units": "1"}),
            jacobian_error=("check", derivatives.per_point, {"long_name": note, "units": "1"}),
            jacobian_column_error=(("check", "parameter"), derivatives.per_column,
                                   {"long_name": f"{note}, per parameter", "units": "1"}),
            jacobian_parameter_error=("parameter", derivatives.per_parameter,
                                      {"long_name": f"{note}, per parameter over all check points", "units": "1"}),
        )
    if derivatives is not None and derivatives.negligible is not None:
        data.update(
            jacobian_parameter_error_absolute=("parameter", derivatives.per_parameter_absolute, {
                "long_name": "Frobenius error of a parameter's Jacobian column over all check points, over the largest "
                             "column's reference norm (unit-cube coordinates)", "units": "1"}),
            jacobian_negligible=("parameter", derivatives.negligible.astype(np.int8), {
                "long_name": "whether the parameter's derivatives are ~0 (reference column below "
                             f"{NEGLIGIBLE_COLUMN} of the largest): its error is read as the absolute one",
                "units": "1", "flag_values": np.array([0, 1], np.int8), "flag_meanings": "resolved negligible"}),
        )
    return xr.Dataset(data, coords=coords)


def _test_predictions(members: MemberReport, out_dims: list[str], long_name: str,
                      unit_attrs: dict[str, Any]) -> dict[str, xr.DataArray]:
    """``prediction(test, *out)``, the members' mean at the test samples, and beside it ``prediction_member``,
    ``prediction_surrogate_std`` and ``prediction_combined_interval`` (the mean of the members is the prediction
    itself: no ``prediction_member_mean``)."""
    stacked = xr.DataArray(members.predictions, dims=("member", "test", *out_dims))
    estimate = stacked.mean("member").assign_attrs(long_name=f"{long_name} predicted by the ensemble at the test "
                                                             f"samples", **unit_attrs)
    spread = spread_variables("prediction", estimate, stacked, members.level)
    return {"prediction": estimate, **{name: v for name, v in spread.items() if not name.endswith(MEMBER_MEAN)}}
