"""Figures of every output shape, checked by their structure (panels, axis labels, titles, legends), never
by pixels; the layout rule on the shapes beyond them; and the figure modules leave matplotlib's backend
to their caller.

The datasets come from the library verbs on one tiny model per shape (:mod:`tests.helpers.shapes`):
a scalar ``y[B]``, a named vector with a unit per name, a series on ``day``, ``species x day`` and a
``lat x lon`` field.
"""
from __future__ import annotations

import importlib
import pickle
import pkgutil
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

import sensitivity.plots
from sensitivity.outputs import positions as pos
from sensitivity.plots import layout as lay
from tests.helpers.legible import illegible
from tests.helpers.shapes import DAYS, LAT, LON, SHAPES, results

DAY = "day of the season [day]"
#: (title, x axis label or tick labels) of each panel of a figure laid out on the model's own dims.
PANELS = {
    "scalar": [("", ["level"])],
    "named": [("outputs in m", ["H", "R"]), ("outputs in m3 s-1", ["Q"])],
    "series": [("", DAY)],
    "labels_by_series": [("species = prey", DAY), ("species = predator", DAY)],
}
#: Units of the model's values in each of those panels.
UNITS = {"scalar": ["m"], "named": ["m", "m3 s-1"], "series": ["m"], "labels_by_series": ["m", "m"]}
QUANTITY = {"scalar": "water level", "named": "gauge readings", "series": "population",
            "labels_by_series": "population", "field": "surface height"}
PARAMETERS = ["a", "k", "c"]
METHODS = ["first_order", "unscented", "monte_carlo"]
MEASURES = 6  # S1, ST, the DGSM bound, Morris mu*, the activity score, the local sensitivity


@dataclass
class Drawn:
    """What a figure holds, read just before it is written."""

    panels: list  # the axes that are not colorbars, in the order they were made
    colorbars: int
    legend: list[str]  # entries of every legend, the figure's and the panels'
    suptitle: str

    @classmethod
    def of(cls, fig) -> "Drawn":
        axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
        legends = list(fig.legends) + [ax.get_legend() for ax in axes if ax.get_legend() is not None]
        return cls(axes, len(fig.axes) - len(axes), [t.get_text() for lg in legends for t in lg.get_texts()],
                   fig._suptitle.get_text() if fig._suptitle is not None else "")


def titles(axes) -> list[str]:
    return [ax.get_title() for ax in axes]


def ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def assert_panels(axes, shape: str) -> None:
    """Each panel titled with its labels, its x axis the coordinate with units or the output names (upright)."""
    assert len(axes) == len(PANELS[shape])
    for ax, (title, x) in zip(axes, PANELS[shape]):
        assert ax.get_title() == title
        if isinstance(x, str):
            assert ax.get_xlabel() == x
        else:
            assert ticks(ax) == x and all(t.get_rotation() == 0 for t in ax.get_xticklabels())


def assert_series(ax, n_lines: int) -> None:
    """``n_lines`` labelled lines, each along the whole coordinate in order (no wrap into the next label)."""
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert len(lines) == n_lines
    for line in lines:
        np.testing.assert_array_equal(line.get_xdata(), DAYS)


def assert_map(ax) -> None:
    """A latitude x longitude map: longitude across, latitude up, with units, one cell per output."""
    assert ax.get_xlabel() == "longitude [degrees_east]" and ax.get_ylabel() == "latitude [degrees_north]"
    (mesh,) = [c for c in ax.collections if isinstance(c, matplotlib.collections.QuadMesh)]
    assert mesh.get_array().shape == (len(LAT), len(LON))


@pytest.fixture(autouse=True)
def agg():
    before = matplotlib.get_backend()
    matplotlib.use("Agg")
    yield
    matplotlib.use(before)


@pytest.fixture(scope="module", params=SHAPES)
def study(request, tmp_path_factory):
    """``(shape, {result: path})``: the datasets of one shape, made once for the module."""
    return request.param, results(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture
def drawn(monkeypatch):
    """``{file name: Drawn}`` of every figure written through :func:`sensitivity.plots.layout.save`; each one
    must be legible as written (:func:`tests.helpers.legible.illegible`)."""
    figures: dict[str, Drawn] = {}
    save = lay.save

    def record(fig, figure_path, dpi=110):
        figures[Path(figure_path).name] = Drawn.of(fig)  # its text as the figure module set it
        written = pickle.loads(pickle.dumps(fig))  # written all the same (its text fitted), at a fast resolution
        path = save(written, figure_path, dpi=30)
        plt.close(fig)
        problems = illegible(written)
        assert not problems, f"{Path(figure_path).name}: " + "; ".join(problems)
        return path

    monkeypatch.setattr(lay, "save", record)
    return figures


# ----------------------------------------------------------------------------- sweep
def test_sweep_figure(study, drawn, tmp_path):
    from sensitivity.plots.sweep import sweep_figure

    shape, paths = study
    assert sweep_figure(paths["sweep"], tmp_path / "sweep.png").stat().st_size > 0
    d = drawn["sweep.png"]
    if shape == "field":  # median |dy/dx| x range per parameter, one colour scale
        assert titles(d.panels) == PARAMETERS and d.colorbars == 1
        for ax in d.panels:
            assert_map(ax)
        return
    assert_panels(d.panels, shape)
    assert [ax.get_ylabel() for ax in d.panels] == [f"dy/dx x range of x [{u}]" for u in UNITS[shape]]
    assert d.legend == PARAMETERS
    if shape in ("series", "labels_by_series"):
        for ax in d.panels:
            assert_series(ax, len(PARAMETERS))


# ----------------------------------------------------------------------------- calibration
def test_calibration_fit_has_error_bars_and_the_band(study, drawn, tmp_path):
    from sensitivity.plots.calibration import calibration_figures

    shape, paths = study
    written = calibration_figures(paths["calibration"], tmp_path)
    assert [p.name for p in written] == ["calibration_fit.png", "calibration_convergence.png",
                                         "calibration_correlation.png"]
    d = drawn["calibration_fit.png"]
    ds = xr.open_dataset(paths["calibration"])
    if shape == "field":
        assert titles(d.panels) == ["observed", "best fit", "observed - best fit"] and d.colorbars == 2
        for ax in d.panels:
            assert_map(ax)
        return
    assert_panels(d.panels, shape)
    assert [ax.get_ylabel() for ax in d.panels] == [f"{QUANTITY[shape]} [{u}]" for u in UNITS[shape]]
    lines = shape in ("series", "labels_by_series")
    assert d.legend == (["95% delta-method band of the fit", "best fit", "observed +- 1 std"] if lines else
                        ["best fit, 95% delta-method band", "observed +- 1 std"])
    plan = pos.plan(ds["y_obs"], pos.output_dims(ds["y_obs"]))
    for ax, panel in zip(d.panels, plan.panels):
        (observed,) = [c for c in ax.containers if c.get_label() == "observed +- 1 std"]
        segments = observed.lines[2][0].get_segments()  # one vertical bar per observation (none where missing)
        half = np.array([(s[1, 1] - s[0, 1]) / 2 for s in segments if len(s)])
        std = lay.along_x(ds["observation_std"], plan, panel)
        np.testing.assert_allclose(half, std[np.isfinite(lay.along_x(ds["y_obs"], plan, panel))], rtol=1e-12)
        if lines:
            assert_series(ax, 1)  # the best fit, in its band
            assert any(c.get_label().startswith("95% delta-method band") for c in ax.collections)


def test_an_ensembles_calibration_draws_the_combined_interval_of_its_estimates(drawn, tmp_path):
    """The figure's thick whiskers are ``estimate_combined_interval``, the thin ones ``parameter_interval``, both in
    standard errors of the fit about its estimate; the members' own estimates and the true values beside them."""
    from sensitivity.analyses.calibration import calibrate_ensemble
    from sensitivity.analyses.calibration.observations import with_true_parameters
    from sensitivity.plots.calibration import calibration_figures
    from tests.helpers.biased_ensemble import biased_ensemble

    truth = np.array([0.7, -0.3])
    e = biased_ensemble(np.random.default_rng(0), truth)
    ds = calibrate_ensemble(e.mean, e.members, e.values, e.observations, starts=np.zeros((1, 2)))
    ds = with_true_parameters(ds, {"p0": truth[0], "p1": truth[1]}).drop_vars("message")
    ds.to_netcdf(tmp_path / "calibration.nc")
    written = calibration_figures(tmp_path / "calibration.nc", tmp_path)
    assert written[-1].name == "calibration_estimates.png"
    d = drawn["calibration_estimates.png"]
    (ax,) = d.panels
    assert ticks(ax) == ["p0", "p1"]
    assert d.legend == ["each member's own estimate", "true value", "95% combined interval (fit and surrogate)",
                        "best fit, its 95% interval", "with the emulator variance"]
    best = int(ds["best_start"])
    se, estimate = ds["standard_error"].values[best], ds["estimate"].values[best]
    bars = {c.get_label(): c.lines[2][0].get_segments() for c in ax.containers}
    for label, name in (("95% combined interval (fit and surrogate)", "estimate_combined_interval"),
                        ("best fit, its 95% interval", "parameter_interval")):
        drawn_bounds = np.array([[s[0, 1], s[1, 1]] for s in bars[label]])
        interval = ds[name].values if name != "parameter_interval" else ds[name].values[best]
        np.testing.assert_allclose(drawn_bounds, (interval - estimate[:, None]) / se[:, None], rtol=1e-9)


def test_an_ensembles_posterior_predictive_draws_its_band_with_the_surrogates_error(drawn, tmp_path):
    """The reference (the posterior predictive)'s ``output_band_combined_interval`` as dotted whiskers with wide
    caps, in the legend and the title; the axes hold it."""
    from sensitivity.plots.propagation import propagation_figure
    from tests.helpers.biased_ensemble import ensemble_predictive

    ds, _, _ = ensemble_predictive(0)
    ds.to_netcdf(tmp_path / "propagation.nc")
    propagation_figure(tmp_path / "propagation.nc", tmp_path / "propagation.png")
    d = drawn["propagation.png"]
    assert "posterior band with the surrogate's error" in d.legend
    assert "dotted: posterior's band with the surrogate's error" in d.suptitle
    top = d.panels[0]
    (wide,) = [c for c in top.containers if c.get_label() == "posterior band with the surrogate's error"]
    segments = wide.lines[2][0].get_segments()
    expected = ds["output_band_combined_interval"].isel(propagation_method=1).values
    np.testing.assert_allclose([[s[0, 1], s[1, 1]] for s in segments], expected, rtol=1e-9)
    low, high = top.get_ylim()
    assert low <= expected.min() and expected.max() <= high


# ----------------------------------------------------------------------------- propagation
def test_propagation_figure(study, drawn, tmp_path):
    from sensitivity.plots.propagation import propagation_figure

    shape, paths = study
    propagation_figure(paths["propagation"], tmp_path / "propagation.png")
    d = drawn["propagation.png"]
    assert "against monte_carlo" in d.suptitle
    if shape == "field":  # rows: mean, band width, verdict; columns: methods; the reference has no verdict map
        assert len(d.panels) == 3 * len(METHODS) and d.colorbars == 3
        maps = [ax for ax in d.panels if ax.axison]
        assert titles(maps) == METHODS * 2 + METHODS[:2]
        for ax in maps:
            assert_map(ax)
        return
    verdicts = [ax for ax in d.panels if ax.get_ylabel().startswith("|method - monte_carlo|")]
    means = [ax for ax in d.panels if ax not in verdicts]
    assert titles(means) == [title for title, _ in PANELS[shape]]
    assert [ax.get_ylabel() for ax in means] == [f"{QUANTITY[shape]} [{u}]" for u in UNITS[shape]]
    assert len(verdicts) == len(PANELS[shape])
    for ax, (_, x) in zip(verdicts, PANELS[shape]):
        assert ax.get_title().startswith("flagged: first_order ")
        assert (ax.get_xlabel() == x) if isinstance(x, str) else (ticks(ax) == x)
    assert d.legend == METHODS
    if shape in ("series", "labels_by_series"):
        for ax in means:
            assert_series(ax, len(METHODS))


def test_propagation_without_a_verdict_draws_no_verdict_panels(drawn, tmp_path):
    """The moment methods alone (no Monte Carlo to judge them by) on a linear ``species x day`` model."""
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import Propagation, propagate
    from sensitivity.inputs.uncertainty import inputs_from_space
    from sensitivity.datasets import write_atomic
    from sensitivity.plots.propagation import propagation_figure
    from tests.helpers.shapes import SPECS, space

    spec = SPECS["labels_by_series"]
    weights = np.random.default_rng(0).standard_normal((spec.size, 3))

    def linear(x):
        return x @ weights.T, np.broadcast_to(weights, (len(x), *weights.shape))

    ds = propagate(BatchedModel(value_and_jacobian=linear, output=spec), inputs_from_space(space()),
                   Propagation(methods=("first_order",)))
    propagation_figure(write_atomic(ds, tmp_path / "propagation.nc"), tmp_path / "propagation.png")
    d = drawn["propagation.png"]
    assert titles(d.panels) == ["species = prey", "species = predator"] and d.legend == ["first_order"]
    assert "no nonlinearity verdict: monte_carlo is not among the methods" in d.suptitle


def test_propagation_of_an_ensemble_draws_the_combined_interval_of_the_mean(drawn, tmp_path):
    """Three linear members of two named outputs, offset by 0, 1, 2: a thick bar per method, as wide as the combined
    interval the dataset records."""
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import MonteCarlo, Propagation, member_moments, merge_members, propagate
    from sensitivity.datasets import write_atomic
    from sensitivity.inputs.uncertainty import gaussian_inputs
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.plots.propagation import propagation_figure

    weights, offsets = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([0.0, 1.0, 2.0])
    spec = OutputSpec.from_dict({"name": "y", "units": "m", "names": ["a", "b"]})

    def stacked(x):
        values = (x @ weights.T)[:, None, :] + offsets[None, :, None]
        return values.reshape(len(x), -1), np.broadcast_to(np.tile(weights, (3, 1)), (len(x), 6, 2))

    inputs = gaussian_inputs(np.zeros(2), np.eye(2), names=["x1", "x2"], units=["1", "1"])
    settings = Propagation(methods=("first_order", "monte_carlo"), monte_carlo=MonteCarlo(n_samples=2**10))
    def average(x):
        return x @ weights.T + 1.0, np.broadcast_to(weights, (len(x), 2, 2))

    mean = propagate(BatchedModel(lambda x: average(x)[0], average, output=spec), inputs, settings, seed=0)
    members = member_moments(BatchedModel(lambda x: stacked(x)[0], stacked, output=spec), inputs, 3, settings, seed=0)
    path = write_atomic(merge_members(mean, members), tmp_path / "propagation.nc")
    propagation_figure(path, tmp_path / "propagation.png")
    d = drawn["propagation.png"]
    assert "dark: the mean's 95% combined interval (sampling and surrogate)" in d.suptitle
    top = d.panels[0]
    thick = [c for c in top.collections if max(c.get_linewidths(), default=0) >= 6]
    assert len(thick) == 2  # one per method
    with xr.open_dataset(path) as ds:
        expected = np.sort(ds["output_mean_combined_interval"].values.reshape(-1, 2), axis=0)
    drawn_bounds = np.sort(np.concatenate([np.array([seg[:, 1] for seg in c.get_segments()]) for c in thick]), axis=0)
    np.testing.assert_allclose(drawn_bounds, expected, rtol=1e-6)


def test_propagation_on_a_cf_time_axis_draws_its_verdict_against_the_dates(drawn, tmp_path):
    """A gauge series on ``days since 2021-01-01`` (decoded to dates when the file is read): the verdict panel's
    lines are drawn at the dates (adding a marker offset to them was a crash), one per flagged method."""
    from sensitivity.inputs.uncertainty import inputs_from_space
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import MonteCarlo, Propagation, propagate
    from sensitivity.datasets import write_atomic
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.plots.propagation import propagation_figure
    from tests.helpers.shapes import space

    spec = OutputSpec.from_dict({"name": "discharge", "units": "mm day-1", "dims": [
        {"name": "station", "values": ["upper", "lower"]},
        {"name": "time", "values": {"start": 0, "stop": 5}, "units": "days since 2021-01-01"}]})
    weights = np.random.default_rng(0).standard_normal((spec.size, 3))
    model = BatchedModel(lambda x: np.exp(x @ weights.T),
                         lambda x: (np.exp(x @ weights.T), np.exp(x @ weights.T)[..., None] * weights), output=spec)
    ds = propagate(model, inputs_from_space(space()), Propagation(
        methods=("first_order", "monte_carlo"), monte_carlo=MonteCarlo(n_samples=2**10, n_replicates=4)), seed=1)
    propagation_figure(write_atomic(ds, tmp_path / "propagation.nc"), tmp_path / "propagation.png")
    d = drawn["propagation.png"]
    verdicts = [ax for ax in d.panels if ax.get_ylabel().startswith("|method - monte_carlo|")]
    assert len(verdicts) == 2 and d.legend == ["first_order", "monte_carlo"]
    dates = np.arange("2021-01-01", "2021-01-06", dtype="datetime64[D]")
    for ax in verdicts:
        line = ax.get_lines()[0]
        np.testing.assert_array_equal(np.asarray(line.get_xdata(), "datetime64[D]"), dates)


def test_a_method_far_off_the_reference_runs_beyond_the_axes_and_is_named(drawn, tmp_path):
    """An unscented transform whose sigma points left the inputs' bounds gave bands 10^4 times Monte Carlo's and
    flattened every other method to a line at 0: the axes keep to the bands near the reference, the title names
    the one left beyond."""
    from sensitivity.inputs.uncertainty import inputs_from_space
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import MonteCarlo, Propagation, propagate
    from sensitivity.datasets import write_atomic
    from sensitivity.plots.propagation import propagation_figure
    from tests.helpers.shapes import SPECS, space

    spec = SPECS["labels_by_series"]
    weights = np.random.default_rng(0).standard_normal((spec.size, 3))
    model = BatchedModel(lambda x: x @ weights.T,
                         lambda x: (x @ weights.T, np.broadcast_to(weights, (len(x), *weights.shape))), output=spec)
    ds = propagate(model, inputs_from_space(space()), Propagation(
        methods=("first_order", "monte_carlo"), monte_carlo=MonteCarlo(n_samples=2**10, n_replicates=4)), seed=1)
    wild = ds["propagation_method_name"].values == "first_order"
    for var in ("output_mean", "output_quantile"):
        ds[var] = ds[var].where(~xr.DataArray(wild, dims="propagation_method"), ds[var] * 1e4)
    propagation_figure(write_atomic(ds, tmp_path / "propagation.nc"), tmp_path / "propagation.png")
    d = drawn["propagation.png"]
    assert "first_order beyond the axes (scaled to the bands near monte_carlo)" in d.suptitle
    reference = ds["output_quantile"].sel(propagation_method=int(np.flatnonzero(~wild)[0]))
    tops = [ax for ax in d.panels if not ax.get_ylabel().startswith("|method")]
    for ax, species in zip(tops, range(2)):
        band = reference.isel(species=species)
        height = float(band.max() - band.min())
        low, high = ax.get_ylim()
        assert float(band.min()) - height <= low <= float(band.min()) and float(band.max()) <= high
        assert high <= float(band.max()) + height


# ----------------------------------------------------------------------------- indices
#: Titles naming the output of each row of the index bar chart.
ROWS = {"scalar": ["output = level"], "named": ["output = H", "output = Q", "output = R"], "series": ["day = "],
        "labels_by_series": ["species = prey, day = ", "species = predator, day = "], "field": ["lat = "]}


def test_indices_figures(study, drawn, tmp_path):
    from sensitivity.plots.indices import indices_figures

    shape, paths = study
    written = {p.name for p in indices_figures(paths["indices"], tmp_path)}
    resolved = shape in ("series", "labels_by_series", "field")
    assert written == {"indices_bars.png", "indices_ranking.png", "indices_active_subspace.png"} | (
        {"indices_resolved.png"} if resolved else set())
    bars = drawn["indices_bars.png"]
    assert len(bars.panels) == len(ROWS[shape]) * MEASURES
    for r, row in enumerate(ROWS[shape]):
        for ax in bars.panels[r * MEASURES:(r + 1) * MEASURES]:
            assert ax.get_title().split("\n")[1].startswith(row)
            assert ticks(ax) == PARAMETERS and all(t.get_rotation() == 0 for t in ax.get_xticklabels())
    if not resolved:
        return
    d = drawn["indices_resolved.png"]
    if shape == "field":  # the total index per parameter
        assert titles(d.panels) == PARAMETERS and d.colorbars == 1
        for ax in d.panels:
            assert_map(ax)
        return
    n_panels = len(PANELS[shape])
    assert len(d.panels) == (MEASURES - 1) * n_panels and d.legend == PARAMETERS
    for row in range(MEASURES - 1):
        shown = d.panels[row * n_panels:(row + 1) * n_panels]
        for ax, (title, _) in zip(shown, PANELS[shape]):
            assert ax.get_title().endswith(title)
            assert_series(ax, len(PARAMETERS))
    assert [ax.get_xlabel() for ax in d.panels[-n_panels:]] == [DAY] * n_panels


def test_multifidelity_figure(study, drawn, tmp_path):
    """The anchored and the surrogate-only indices side by side with their intervals: a series along its days
    (a panel per parameter and index, two lines and two bands each), named scalars and a field as bars per
    parameter (two bars per parameter, with whiskers) in a row per shown output."""
    from sensitivity.datasets import open_result
    from sensitivity.plots.multifidelity import multifidelity_figure

    shape, paths = study
    ds = open_result(paths["multifidelity"])
    multifidelity_figure(ds, tmp_path / "multifidelity_indices.png")
    d = drawn["multifidelity_indices.png"]
    assert d.legend == ["simulator-anchored", "surrogate only"] and "simulator runs" in d.suptitle
    if shape in ("series", "labels_by_series"):
        assert len(d.panels) == len(PARAMETERS) * 2
        held = ", species = prey" if shape == "labels_by_series" else ""
        assert titles(d.panels)[:2] == [f"first-order index S1: a{held}", f"total index ST: a{held}"]
        assert [ax.get_xlabel() for ax in d.panels[-2:]] == [DAY, DAY]
        for ax in d.panels:
            assert len(ax.get_lines()) == 2 and len(ax.collections) == 2
        return
    rows = {"scalar": 1, "named": 3, "field": 1}[shape]
    assert len(d.panels) == rows * 2
    for ax in d.panels:
        assert ticks(ax) == PARAMETERS and len(ax.patches) == 2 * len(PARAMETERS)
    if shape in ("scalar", "named"):
        assert [t.split("\n")[1] for t in titles(d.panels)[::2]] == ROWS[shape]


def test_an_ensembles_combined_interval_is_drawn_beside_the_sampling_one(drawn, tmp_path):
    """An ensemble's ``<index>_combined_interval`` (sampling and surrogate error): a grey whisker per
    parameter from its low to its high bound, over the black one, and the title says so."""
    from sensitivity.plots.indices import bars_figure

    paths = results("series", tmp_path / "run")
    with xr.open_dataset(paths["indices"]) as ds:
        ds = ds.load()
    half = ds["sobol_ST_interval"].diff("bound").squeeze("bound", drop=True)
    ds["sobol_ST_combined_interval"] = ds["sobol_ST_interval"] + half * xr.DataArray([-1.0, 1.0], dims="bound")
    ds = ds.assign(member_seed=("member", np.arange(5)))  # 5 members
    bars_figure(ds, tmp_path / "indices_bars.png")
    d = drawn["indices_bars.png"]
    assert "grey: combined with the surrogate's error over 5 members" in d.suptitle
    ax = next(ax for ax in d.panels if ax.get_title().startswith("Sobol' total ST"))
    index = {"day": int(ax.get_title().split("day = ")[1].split()[0]) - 1}
    (grey,) = [c for c in ax.collections if c.get_alpha() == 0.3]
    low, high = ds["sobol_ST_combined_interval"].isel(index).transpose("parameter", "bound").values.T
    np.testing.assert_allclose([seg[:, 1].min() for seg in grey.get_segments()], np.minimum(
        low, ds["sobol_ST"].isel(index).values), rtol=1e-6)
    np.testing.assert_allclose([seg[:, 1].max() for seg in grey.get_segments()], high, rtol=1e-6)


# ----------------------------------------------------------------------------- posterior
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:posterior chains failed convergence checks")  # 4 x 30 draws, on purpose
def test_posterior_figures_are_parameter_only(drawn, tmp_path):
    """NUTS (short chains) on the series model: a pair plot of the parameters and one trace per parameter."""
    from sensitivity.plots.posterior import posterior_figures
    from tests.helpers.shapes import posterior

    posterior_figures(posterior(tmp_path / "run"), tmp_path)
    pairs, trace = drawn["posterior_pairs.png"], drawn["posterior_trace.png"]
    labels = ["a [m]", "k [day-1]", "c [m]"]
    assert len(pairs.panels) == 9 and [ax.get_xlabel() for ax in pairs.panels[-3:]] == labels
    assert [ax.get_ylabel() for ax in trace.panels] == labels


def test_figures_of_three_dims_with_long_names_stay_legible(drawn, tmp_path):
    """A map per year of a (year, lat, lon) output whose names are a real study's length: every figure is
    written, and the ``drawn`` fixture finds each legible (no title or label outside the figure or over
    another's)."""
    from sensitivity.plots.calibration import calibration_figures
    from sensitivity.plots.indices import indices_figures
    from sensitivity.plots.propagation import propagation_figure
    from sensitivity.plots.sweep import sweep_figure

    paths = results("cube", tmp_path / "run")
    sweep_figure(paths["sweep"], tmp_path / "sweep.png")
    calibration_figures(paths["calibration"], tmp_path)
    propagation_figure(paths["propagation"], tmp_path / "propagation.png")
    indices_figures(paths["indices"], tmp_path)
    assert {"sweep.png", "calibration_fit.png", "propagation.png", "indices_bars.png", "indices_resolved.png"} <= set(
        drawn)
    assert "year = 2050 year" in drawn["propagation.png"].panels[0].get_title()  # the middle year is mapped


# ----------------------------------------------------------------------------- the layout beyond the five shapes
def _numeric(name: str, values, units: str) -> xr.DataArray:
    return xr.DataArray(np.asarray(values, float), dims=name, attrs={"units": units, "long_name": name})


def _labeled(name: str, names: list[str]) -> dict:
    return {name: np.arange(len(names)), f"{name}_name": (name, np.asarray(names, dtype=object))}


def _array(coords: dict, dims: list[str]) -> xr.DataArray:
    return xr.DataArray(np.zeros([len(coords[d]) for d in dims]), dims=dims, coords=coords)


def test_two_labeled_dims_and_a_series_are_panels_per_pair_of_labels():
    da = _array({**_labeled("site", ["A", "B"]), **_labeled("species", ["prey", "predator"]),
                 "day": _numeric("day", [1, 2, 3], "day")}, ["site", "species", "day"])
    plan = pos.plan(da, pos.output_dims(da))
    assert plan.kind == "lines" and plan.x == "day" and plan.note == ""
    assert [p.title for p in plan.panels] == ["site = A, species = prey", "site = A, species = predator",
                                              "site = B, species = prey", "site = B, species = predator"]
    assert lay.along_x(da, plan, plan.panels[1]).shape == (3,)


def test_a_third_numeric_dim_is_held_at_its_middle_and_named_in_the_title():
    da = _array({"day": _numeric("day", [1, 2, 3], "day"), "lon": _numeric("lon", [0, 1], "degrees_east"),
                 "lat": _numeric("lat", [5, 6, 7, 8], "degrees_north")}, ["day", "lon", "lat"])
    plan = pos.plan(da, pos.output_dims(da))
    assert (plan.kind, plan.y, plan.x) == ("map", "lat", "lon")  # latitude up, whatever the order of the dims
    assert [p.title for p in plan.panels] == ["day = 2 day"]
    generic = _array({"depth": _numeric("depth", [1, 2], "m"), "distance": _numeric("distance", [0, 5, 9], "km")},
                     ["depth", "distance"])
    assert (lambda p: (p.y, p.x))(pos.plan(generic, ["depth", "distance"])) == ("depth", "distance")


def test_observations_are_held_where_most_of_them_are():
    """Observations of days 1 and 3 only, most on day 3: a figure of them holds the day at 3, not at the
    unobserved middle; where two days have as many, at the one nearer the middle."""
    coords = {"day": _numeric("day", [1, 2, 3, 4, 5], "day"), "lat": _numeric("lat", [5, 6], "degrees_north"),
              "lon": _numeric("lon", [0, 1], "degrees_east")}
    observed = _array(coords, ["day", "lat", "lon"]).astype(bool)
    observed[0, 0, 0] = observed[2] = True
    plan = pos.plan(observed, pos.output_dims(observed), shown=observed)
    assert [p.title for p in plan.panels] == ["day = 3 day"]
    observed[4] = observed[0] = True
    assert [p.index["day"] for p in pos.plan(observed, pos.output_dims(observed), shown=observed).panels] == [2]
    observed[2, 0, 0] = False
    assert [p.title for p in pos.plan(observed, pos.output_dims(observed), shown=observed).panels] == ["day = 1 day"]


def test_a_cf_time_axis_is_drawn_against_its_dates():
    times = xr.DataArray(np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[ns]"), dims="time",
                         attrs={"long_name": "date"})
    da = _array({"time": times, **_labeled("output", ["H"])}, ["output", "time"])
    plan = pos.plan(da, ["output", "time"])
    assert plan.kind == "lines" and lay.x_positions(da, plan, plan.panels[0]).dtype.kind == "M"
    assert lay.coord_label(da, "time") == "date" and plan.panels[0].title == "output = H"


def test_named_scalars_go_along_x_or_into_a_panel_each():
    da = _array({**_labeled("site", ["A", "B", "C"]), **_labeled("output", ["H", "Q"])}, ["site", "output"])
    along = pos.plan(da, ["site", "output"])
    assert along.kind == "points" and along.x == "output" and [p.title for p in along.panels] == [
        "site = A", "site = B", "site = C"]
    each = pos.plan(da, ["site", "output"], categories=False)
    assert each.x is None and len(each.panels) == 6 and each.panels[1].title == "site = A, output = Q"


def test_many_named_scalars_continue_in_the_next_panel():
    names = [f"y{i}" for i in range(pos.MAX_CATEGORIES + 4)]
    da = _array(_labeled("output", names), ["output"])
    plan = pos.plan(da, ["output"])
    shown = [[names[i] for i in lay.categories(plan, p, da)] for p in plan.panels]
    assert shown == [names[:pos.MAX_CATEGORIES], names[pos.MAX_CATEGORIES:]]


def test_panels_beyond_the_cap_are_left_out_and_counted():
    da = _array({**_labeled("station", [f"s{i}" for i in range(30)]), "day": _numeric("day", [1, 2], "day")},
                ["station", "day"])
    plan = pos.plan(da, ["station", "day"])
    assert len(plan.panels) == pos.MAX_PANELS and plan.note == f" (first {pos.MAX_PANELS} of 30 panels)"


def test_output_dims_leave_out_the_dataset_contracts_dims():
    da = xr.DataArray(np.zeros((2, 3, 4, 2)), dims=["propagation_method", "species", "day", "bound"])
    assert pos.output_dims(da) == ["species", "day"]
    assert pos.output_dims(da, exclude=["day"]) == ["species"]


# ----------------------------------------------------------------------------- backend
def test_importing_the_figure_modules_keeps_the_callers_backend():
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # a non-interactive backend other than the Agg the workflows select
    try:
        names = ["sensitivity.plots"] + [f"sensitivity.plots.{m.name}" for m in pkgutil.iter_modules(sensitivity.plots.__path__)]
        assert len(names) > 1
        for name in names:
            importlib.reload(importlib.import_module(name))  # run each module's import-time code again
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)


def test_past_ten_parameters_the_index_figures_show_the_most_influential(drawn, tmp_path):
    """A field of 14 inputs, y = w . x on uniforms: the total Sobol' index of input i is w_i^2 / sum w^2 (closed
    form), so the four inputs of weight 0.1 are the ones left out of every figure, which says so."""
    from sensitivity.analyses import indices
    from sensitivity.datasets import write_atomic
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.plots.indices import indices_figures
    from sensitivity.inputs.space import ParameterSpace
    from sensitivity.surrogates.load import load_surrogate

    weak = [2, 5, 9, 12]
    weights = np.array([0.1 if i in weak else 1.0 + i for i in range(14)])
    names = [f"cell{i}" for i in range(14)]
    space = ParameterSpace.from_records([{"name": n, "units": "mm", "low": 0.0, "high": 1.0} for n in names])
    surrogate = load_surrogate(lambda x: x @ weights[:, None], input_names=names, input_units=space.units,
                               dtype="float64", output={"name": "discharge", "units": "m3 s-1"})
    jac = compile_jacobian(surrogate, jit_compile=False)
    ds = indices.compute(jac, space, {"sobol": indices.Sobol(n=256, convergence_start=64),
                                      "dgsm": indices.Dgsm(n=256), "active_subspaces": indices.ActiveSubspaces(n=256)},
                         intervals=indices.Intervals("rqmc", replicates=4, n_resamples=50))
    indices_figures(write_atomic(ds, tmp_path / "indices.nc"), tmp_path)
    strong = [n for i, n in enumerate(names) if i not in weak]
    note = "the 10 of 14 parameters of largest total Sobol' index"
    bars = drawn["indices_bars.png"]
    assert all(ticks(ax) == strong for ax in bars.panels) and note in bars.suptitle
    assert ticks(drawn["indices_ranking.png"].panels[0]) == strong
    spectrum = drawn["indices_active_subspace.png"]
    assert ticks(spectrum.panels[1]) == strong and note in spectrum.suptitle

    from sensitivity.sweep.designs import make_grid
    from sensitivity.plots.sweep import sweep_figure
    from sensitivity.sweep.stream import sweep

    swept = sweep(jac, make_grid(space, "sobol", n=32, seed=0), tmp_path / "sweep.nc", attrs={}, fingerprint="figures",
                  progress=False).path
    sweep_figure(swept, tmp_path / "sweep.png")  # dy/dx x range = w_i on every point
    d = drawn["sweep.png"]
    assert d.legend == strong and "the 10 of 14 parameters of largest median |dy/dx| x range" in d.suptitle


def test_past_ten_parameters_the_posterior_figures_show_the_slowest_to_mix(drawn, tmp_path):
    """14 parameters, four of them of large ESS: the pair and trace plots show the other ten (10 x 10 panels, not
    14 x 14), each named in its row, and their titles say why."""
    from sensitivity.plots.posterior import posterior_figures

    n, fast = 14, [1, 6, 7, 13]
    names = [f"cell{i}" for i in range(n)]
    ess = np.array([5000.0 if i in fast else 300.0 + i for i in range(n)])
    rng = np.random.default_rng(0)
    ds = xr.Dataset({"draws": (("chain", "draw", "parameter"), rng.standard_normal((2, 50, n))),
                     "divergent": (("chain", "draw"), np.zeros((2, 50), np.int8)), "n_divergent": 0,
                     "rhat": ("parameter", np.ones(n)), "ess_bulk": ("parameter", ess), "ess_tail": ("parameter", ess),
                     "laplace_mean": ("parameter", np.zeros(n)), "laplace_covariance": (("parameter", "p2"), np.eye(n))},
                    coords={"parameter_name": ("parameter", names), "parameter_units": ("parameter", ["mm"] * n)})
    ds.to_netcdf(tmp_path / "posterior.nc")
    posterior_figures(tmp_path / "posterior.nc", tmp_path)
    slow = [f"{name} [mm]" for i, name in enumerate(names) if i not in fast]
    pairs, trace = drawn["posterior_pairs.png"], drawn["posterior_trace.png"]
    note = "the 10 of 14 parameters of smallest ESS (slowest to mix)"
    assert len(pairs.panels) == 100 and [ax.get_xlabel() for ax in pairs.panels[-10:]] == slow and note in pairs.suptitle
    assert [ax.get_ylabel() for ax in trace.panels] == slow and note in trace.suptitle


def test_a_field_of_inputs_is_mapped_cell_by_cell_per_output_label(tmp_path):
    """Parameters f_0 .. f_5 on a 2 x 3 grid (C order) and one other: per site, the map of ST is its
    variance-weighted mean over time, sum_t V ST / sum_t V, and Morris mu* the plain mean; a shape that does not
    fit the parameters fails naming the field."""
    from sensitivity.errors import ConfigError
    from sensitivity.inputs.fields import field_cells
    from sensitivity.plots.fields import field_maps
    from sensitivity.plots.indices import indices_figures

    rng = np.random.default_rng(0)
    names = ["other", *[f"f_{i}" for i in range(6)]]
    st, mu, variance = rng.uniform(size=(7, 2, 4)), rng.uniform(size=(7, 2, 4)), rng.uniform(1, 2, size=(2, 4))
    dims = ("parameter", "site", "t")
    ds = xr.Dataset({"sobol_ST": (dims, st), "morris_mu_star": (dims, mu), "sobol_variance": (dims[1:], variance)},
                    coords={"parameter_name": ("parameter", names), "site_name": ("site", ["up", "down"]),
                            "t": ("t", np.arange(4.0))})
    cells = field_cells(names, {"f": [2, 3]})["f"]
    np.testing.assert_array_equal(cells, np.arange(1, 7))
    maps = {(title, label): values for title, label, values in field_maps(ds, cells, [2, 3])}
    for k, site in enumerate(["up", "down"]):
        weighted = (st[1:, k] * variance[k]).sum(axis=1) / variance[k].sum()
        np.testing.assert_allclose(maps[("Sobol' total ST", f"site = {site}")], weighted.reshape(2, 3), rtol=1e-12)
        np.testing.assert_allclose(maps[("Morris mu*", f"site = {site}")], mu[1:, k].mean(axis=1).reshape(2, 3))
    with pytest.raises(ConfigError, match=r"input_fields.f: shape \[2, 2\] needs 4 parameters named f_\*, the space "
                                          r"has 6"):
        field_cells(names, {"f": [2, 2]})
    path = tmp_path / "indices.nc"
    ds.to_netcdf(path)
    figures = indices_figures(path, tmp_path, {"f": [2, 3]})
    assert tmp_path / "indices_field_f.png" in figures and (tmp_path / "indices_field_f.png").stat().st_size > 0


def _well_indices(n_parameters: int, wells: int, seed: int = 0) -> xr.Dataset:
    """Indices of ``n_parameters`` cells ``k00`` .. at ``wells`` labeled wells, every method's bars present."""
    rng = np.random.default_rng(seed)
    dims = ("parameter", "well")
    data = {var: (dims, rng.uniform(size=(n_parameters, wells))) for var in (
        "sobol_S1", "sobol_ST", "dgsm_sobol_total_bound", "morris_mu_star", "active_subspace_activity_score")}
    return xr.Dataset(data, coords={"parameter_name": ("parameter", [f"k{i:02d}" for i in range(n_parameters)]),
                                    "well_name": ("well", [f"W{i + 1}" for i in range(wells)])})


@pytest.mark.parametrize("n_parameters", [10, 32])
def test_bars_of_many_inputs_and_methods_have_labels_that_do_not_run_together(drawn, tmp_path, n_parameters):
    """Ten (or the ten most influential of 32) short names under each of five methods' bars: the ``drawn`` fixture
    finds every tick label apart from its neighbours (tilted ones as parallel lines a line height apart)."""
    from sensitivity.plots.indices import bars_figure

    bars_figure(_well_indices(n_parameters, wells=1), tmp_path / "indices_bars.png")
    assert all(len(ticks(ax)) == 10 for ax in drawn["indices_bars.png"].panels)


def test_each_wells_bars_show_that_wells_most_influential_cells(drawn, tmp_path):
    """32 cells at 4 wells: each well's row shows the 10 cells of largest total index at that well (not over all
    wells), in input order, and the title says they are chosen per row."""
    from sensitivity.plots.indices import bars_figure

    ds = _well_indices(32, wells=4)
    bars_figure(ds, tmp_path / "indices_bars.png")
    d = drawn["indices_bars.png"]
    st = ds["sobol_ST"].values
    for well in range(4):
        expected = [f"k{i:02d}" for i in sorted(np.argsort(-st[:, well])[:10])]
        row = [ax for ax in d.panels if ax.get_title().endswith(f"well = W{well + 1}")]
        assert row and all(ticks(ax) == expected for ax in row)
    assert "chosen per row" in d.suptitle


def test_a_one_dimensional_field_is_drawn_as_lines_over_its_cells(drawn, tmp_path):
    """``input_fields={logk: [32]}``: one panel per measure, one line per well over the 32 cells, whose values
    are the indices themselves (one output per well: nothing to aggregate)."""
    from sensitivity.plots.fields import field_figure

    ds = _well_indices(32, wells=4)
    field_figure(ds.assign_coords(parameter_name=("parameter", [f"logk_{i}" for i in range(32)])), "logk",
                 np.arange(32), [32], tmp_path / "indices_field_logk.png")
    d = drawn["indices_field_logk.png"]
    sobol = next(ax for ax in d.panels if ax.get_title() == "Sobol' total ST")
    lines = [line for line in sobol.get_lines() if not line.get_label().startswith("_")]
    assert [line.get_label() for line in lines] == [f"well = W{i + 1}" for i in range(4)]
    for well, line in enumerate(lines):
        np.testing.assert_array_equal(line.get_xdata(), np.arange(32))
        np.testing.assert_allclose(line.get_ydata(), ds["sobol_ST"].values[:, well])
    assert d.colorbars == 0


# ----------------------------------------------------------------------------- worth

#: Panels of the candidates' worth per shape: the layout's (labels, unit groups), a map per forecast on a field.
WORTH_PANELS = {"scalar": 1, "named": 2, "series": 1, "labels_by_series": 2, "field": 2}


@pytest.mark.parametrize("shape", SHAPES)
def test_worth_figures_on_every_output_shape(shape, drawn, tmp_path):
    """A linear model of each output shape, every other output observed: the three figures, legible, with the
    candidates' worth laid out on the model's own dims and a design path per forecast."""
    from sensitivity.analyses.worth import WorthSettings, worth
    from sensitivity.datasets import write_atomic
    from sensitivity.plots.worth import worth_figures
    from tests.helpers.shapes import SPECS, space

    spec = SPECS[shape]
    A = np.random.default_rng(3).normal(size=(spec.size, 3))

    class Linear:
        class surrogate:  # noqa: N801 - the engine's attribute
            output = spec

        def __call__(self, x):
            return (x @ A.T).reshape(len(x), *spec.shape), np.broadcast_to(A, (len(x), spec.size, 3)).reshape(
                len(x), *spec.shape, 3)

    observed = np.full(spec.size, np.nan)
    observed[::2][: spec.size - 1] = 1.0  # at least one output left as a candidate
    first = {d.name: d.values[0] for d in spec.dims}
    forecasts = [{"name": "first", "at": first},
                 {"name": "largest", "kind": "max", "over": list(spec.dim_names), "units": spec.flat_units()[0]}]
    ds = worth(Linear(), space(), WorthSettings(forecasts=forecasts, candidate_sigma=0.1, design={"k": 2}),
               best_fit=space().nominal, observed_values=observed.reshape(spec.shape), noise=np.full(spec.size, 0.2))
    path = write_atomic(ds, tmp_path / "worth.nc")
    written = worth_figures(path, tmp_path)
    assert [p.name for p in written] == ["worth_candidates.png", "worth_designs.png", "worth_contributions.png"]
    assert all(p.is_file() for p in written)
    candidates = drawn["worth_candidates.png"]
    assert len(candidates.panels) == WORTH_PANELS[shape]
    assert candidates.colorbars == (2 if shape == "field" else 0)
    assert titles(drawn["worth_designs.png"].panels) == ["design for first (variance)", "design for largest (variance)"]
    assert set(drawn["worth_contributions.png"].legend) == {"first", "largest"}


@pytest.mark.parametrize("series", [False, True])
def test_reliability_design_points_over_the_most_important_pairs(series, tmp_path):
    """Importance factors 0.04, 0.36, 0.6, 0 on a, b, c, d: the pairs of the largest summed importance are (b, c),
    (a, c), (c, d); one output or a series of 30 days, every threshold's design point, the figure written."""
    from sensitivity.plots.reliability import design_point_figure, important_pairs

    outputs = 30 if series else 1
    alpha = np.array([0.2, 0.6, 0.7746, 0.0])
    alpha = alpha / np.linalg.norm(alpha)
    beta = np.linspace(1.0, 3.0, 4)  # [threshold]
    u = beta[:, None, None, None] * np.broadcast_to(alpha[None, None, :, None], (4, 1, 4, outputs))
    dims = ("threshold", "design_point", "parameter", "output")
    ds = xr.Dataset({"design_u": (dims, u), "alpha": (dims, np.broadcast_to(alpha[None, None, :, None], u.shape)),
                     "importance": (dims, np.broadcast_to(alpha[None, None, :, None] ** 2, u.shape)),
                     "form_beta": (("threshold", "output"), np.broadcast_to(beta[:, None], (4, outputs)))},
                    coords={"threshold": ("threshold", [1.0, 2.0, 3.0, 4.0], {"units": "m"}),
                            "parameter_name": ("parameter", ["a", "b", "c", "d"])})
    if series:
        ds = ds.rename({"output": "day"}).assign_coords(day=np.arange(30.0))
    assert important_pairs(ds) == [(1, 2), (0, 2), (2, 3)]
    path = design_point_figure(ds, tmp_path / "design.png")
    assert path.stat().st_size > 10_000
