"""The common contract every study of :data:`sensitivity.studies.STUDIES` passes (issue 56), as scikit-learn's
``parametrize_with_checks`` over ``all_estimators()``: each study declares here how it runs, tiny, on an engine of
every kind and a model of every output shape, and what a bad setting of each of its settings types is.

The engines (:data:`ENGINES`): a Keras file, a TF function, a trained two-member ensemble (float32, as ``train``
writes them) and the TF function at float64 (``EngineSettings(dtype="float64")``). The output shapes
(:data:`SHAPES`): a scalar, a series on ``day``, two named dims ``species x day``. The models are smooth functions of
three parameters, one code for TF and for numpy (its numpy form is the cheap simulator that ``train``, ``simulate``,
``verify`` and ``multifidelity`` run). Everything is built once per session and cached (:class:`Bench`).

A :class:`Case` says, for every engine and shape, whether the study runs there or why the combination has no
meaning (:attr:`Case.not_run`: the reason, checked to be given), and which of its contracts it does not keep yet
(:attr:`Case.xfail`: an expected failure, strict, with its reason).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.spec import OutputDim, OutputSpec

ENGINES = ("keras", "function", "ensemble", "float64")
SHAPES = ("scalar", "series", "two_dims")

#: The contracts a case may not keep yet (:attr:`Case.xfail`).
CONTRACTS = ("labels", "ensemble spread", "bad setting", "summary")

DAYS = np.arange(1.0, 7.0)
SPECIES = ("prey", "predator")
_DAY = OutputDim("day", tuple(DAYS), "day", "day of the season")
SPECS = {
    "scalar": OutputSpec("level", "m", (OutputDim("output", ("level",)),), "water level"),
    "series": OutputSpec("count", "m", (_DAY,), "population"),
    "two_dims": OutputSpec("count", "m", (OutputDim("species", SPECIES, long_name="species"), _DAY), "population"),
}


def model(shape: str, lib: Any = None) -> Callable:
    """``x [B, 3] -> [B, *SPECS[shape].shape]`` (``[B]`` for the scalar) in TF, or in numpy with ``lib=np``; its
    constants are numpy, so they take ``x``'s dtype."""
    if lib is None:
        import tensorflow as lib

    def scalar(x):
        return x[:, 0] * lib.exp(-3.0 * x[:, 1]) + x[:, 2]

    def series(x):
        return x[:, :1] * lib.exp(-x[:, 1:2] * DAYS[None, :]) + x[:, 2:3]

    def two_dims(x):
        decay = x[:, :1] * lib.exp(-x[:, 1:2] * DAYS[None, :])
        return lib.stack([decay + x[:, 2:3], x[:, :1] - decay + 0.5 * x[:, 2:3]], axis=1)

    return {"scalar": scalar, "series": series, "two_dims": two_dims}[shape]


def simulate(shape: str) -> Callable[[np.ndarray], np.ndarray]:
    """The numpy simulator of ``shape``: ``[N, 3] -> [N, *out]`` float64."""
    fn = model(shape, np)
    return lambda x: np.asarray(fn(np.asarray(x, float)), float).reshape(len(x), *SPECS[shape].shape)


def space() -> ParameterSpace:
    """The three inputs ``a [m]``, ``k [day-1]``, ``c [m]``, uniform."""
    return ParameterSpace.from_records([dict(name="a", units="m", low=0.5, high=2.0),
                                        dict(name="k", units="day-1", low=0.1, high=0.6),
                                        dict(name="c", units="m", low=-0.5, high=0.5)])


def points(n: int) -> np.ndarray:
    """``[n, 3]`` points of the space (a scrambled Sobol' design)."""
    from sensitivity.sweep.designs import make_grid

    return make_grid(space(), "sobol", n=n, seed=0).points()


#: A truth inside the space, where the observations of a fit are made.
TRUTH = np.array([1.2, 0.3, 0.1])


@dataclass
class Engine:
    """What a study gets: the loaded surrogate, its compiled engine (an ensemble's: every member's) and the shape."""

    kind: str
    shape: str
    surrogate: Any
    compiled: Any

    @property
    def spec(self) -> OutputSpec:
        return SPECS[self.shape]

    @property
    def members(self) -> int:
        return self.surrogate.n_members if self.surrogate.n_members > 1 else 0


class Bench:
    """The session's engines, trained ensembles and study results, each made once (the cache of a session fixture).

    Parameters
    ----------
    folder
        Where the trained models and the results' files go.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cache: dict = {}

    def once(self, key: tuple, make: Callable[[], Any]) -> Any:
        """``make()`` the first time ``key`` is asked for; what it raised is raised again on each later ask."""
        if key not in self._cache:
            try:
                self._cache[key] = (True, make())
            except Exception as err:  # noqa: BLE001 - kept to be raised to every test that needs it
                self._cache[key] = (False, err)
        ok, value = self._cache[key]
        if not ok:
            raise value
        return value

    def trained(self, shape: str):
        """``train_surrogate`` of the shape's simulator: two members, a few epochs (the ``train`` study's result)."""
        return self.once(("trained", shape), lambda: _train(shape, self.folder / f"train_{shape}"))

    def engine(self, kind: str, shape: str) -> Engine:
        """The engine of ``kind`` for ``shape`` (no XLA: the tests compile many small models)."""
        return self.once(("engine", kind, shape), lambda: self._engine(kind, shape))

    def _engine(self, kind: str, shape: str) -> Engine:
        from sensitivity.engine.ensemble import compile_ensemble
        from sensitivity.engine.jacobian import compile_jacobian
        from sensitivity.surrogates.load import load_surrogate

        s = space()
        if kind in ("function", "float64"):
            surrogate = load_surrogate(model(shape), input_names=s.names, input_units=s.units, output=SPECS[shape],
                                       dtype="float64" if kind == "float64" else "float32")
        else:
            path = self.trained(shape).path
            surrogate = load_surrogate(next(path.glob("*.keras")) if kind == "keras" else path)
        compile_engine = compile_ensemble if kind == "ensemble" else compile_jacobian
        return Engine(kind, shape, surrogate, compile_engine(surrogate, jit_compile=False))

    def result(self, study: str, kind: str, shape: str):
        """The result dataset of ``study`` on the engine of ``kind`` for ``shape`` (:data:`CASES`)."""
        return self.once(("result", study, kind, shape),
                         lambda: CASES[study].run(self, self.engine(kind, shape), self.folder / study / kind / shape))


def _train(shape: str, folder: Path, network=None):
    from sensitivity.training import TrainingPlan, TrainSettings, train_surrogate

    s, x = space(), points(64)
    return train_surrogate(x, simulate(shape)(x), folder, space=s, output=SPECS[shape],
                           network=network or TrainSettings(hidden=(8,), epochs=4, patience=4, batch_size=32),
                           plan=TrainingPlan(members=2, derivative_points=0), simulator=simulate(shape), seed=0)


# --- each study, tiny; its settings by keyword (a bad one is refused: :attr:`Case.bad`) -------------------------


def _observations(engine: Engine):
    """Observations of the shape's model at :data:`TRUTH`, 2 % noise."""
    from sensitivity.analyses.calibration import ObservationModel

    clean = simulate(engine.shape)(TRUTH[None])[0].ravel()
    sigma = 0.02 * np.abs(clean) + 0.01
    return ObservationModel.from_arrays(clean + sigma * np.random.default_rng(0).standard_normal(clean.size),
                                        sigma=sigma)


def _batched(engine: Engine):
    from sensitivity.analyses.callables import BatchedModel

    return BatchedModel.of(engine.compiled)


def run_calibrate(bench: Bench, engine: Engine, folder: Path, fit=None):
    from sensitivity.analyses.calibration import Fit, calibrate

    return calibrate(_batched(engine), _observations(engine), fit or Fit(),
                     starts=np.array([[1.0, 0.2, 0.0], [1.5, 0.4, 0.2]]), space=space())


def run_posterior(bench: Bench, engine: Engine, folder: Path, sampling=None):
    from sensitivity.analyses.posterior import NUTS, Sampling, sample_posterior, space_prior

    s = space()
    sampling = sampling or Sampling(sampler=NUTS(num_draws=10, num_warmup=10, max_tree_depth=3), throw=False,
                                    jit_compile=False)
    return sample_posterior(engine.surrogate.fn, _observations(engine), sampling, prior=space_prior(s),
                            initial=TRUTH + 0.02 * np.array([[-1.0], [1.0]]), space=s,
                            model_dtype=engine.surrogate.dtype, output=engine.spec,
                            members=engine.surrogate.member_fn if engine.members else None)


def run_propagate(bench: Bench, engine: Engine, folder: Path, propagation=None):
    from sensitivity.analyses.propagation import MonteCarlo, Propagation, propagate
    from sensitivity.inputs.uncertainty import inputs_from_space

    propagation = propagation or Propagation(methods=("first_order", "monte_carlo"), monte_carlo=MonteCarlo(
        n_samples=256, n_replicates=4, block_size=256))
    return propagate(_batched(engine), inputs_from_space(space()), propagation, seed=0)


def run_multifidelity(bench: Bench, engine: Engine, folder: Path, study=None):
    from sensitivity.analyses.multifidelity import MultifidelityStudy, multifidelity

    sim = simulate(engine.shape)
    study = study or MultifidelityStudy(budget=60, pilot=10, surrogate_rows=64, n_resamples=10, cost_ratio=100.0)
    return multifidelity(engine.compiled, space(), study, simulator=lambda x, stage: 1.05 * sim(x), seed=0)


#: The method of each settings type of the indices (:data:`sensitivity.analyses.indices.METHODS`), tiny.
INDEX_METHODS = {"Sobol": ("sobol", dict(n=64, convergence_start=32)), "Dgsm": ("dgsm", dict(n=64))}


def run_indices(bench: Bench, engine: Engine, folder: Path, methods=None, intervals=None):
    from sensitivity.analyses import indices

    methods = methods or {key: getattr(indices, name)(**kwargs) for name, (key, kwargs) in INDEX_METHODS.items()}
    return indices.compute(engine.compiled, space(), methods,
                           intervals=intervals or indices.Intervals("rqmc", replicates=4))


def _index_method(name: str, key: str, **bad):
    """The indices of one method ``key`` whose settings type ``name`` has the settings ``bad``."""
    from sensitivity.analyses import indices

    return {"methods": {key: getattr(indices, name)(**bad)}}


def run_sweep(bench: Bench, engine: Engine, folder: Path, grid=None):
    import xarray as xr

    from sensitivity.sweep.designs import make_grid
    from sensitivity.sweep.stream import sweep

    grid = grid or make_grid(space(), "sobol", n=16, seed=0)
    done = sweep(engine.compiled, grid, folder / "sweep.nc", attrs={}, fingerprint="contract", progress=False)
    with xr.open_dataset(done.path) as ds:
        return ds.load()


def run_worth(bench: Bench, engine: Engine, folder: Path, worth_settings=None):
    from sensitivity.analyses.worth import WorthSettings, worth
    from sensitivity.outputs.functionals import Functional

    observed = _observations(engine).y_obs.reshape(engine.spec.shape).copy()
    observed.flat[-1] = np.nan  # one candidate
    total = Functional("total", "sum", over=tuple(d.name for d in engine.spec.dims))
    return worth(engine.compiled, space(), worth_settings or WorthSettings(forecasts=(total,)), best_fit=TRUTH,
                 observed_values=observed, noise=np.full(engine.spec.shape, 0.05))


def run_reliability(bench: Bench, engine: Engine, folder: Path, settings=None):
    from sensitivity.analyses.reliability import ReliabilitySettings, reliability
    from sensitivity.analyses.reliability.sampling import ImportanceSettings

    threshold = float(np.quantile(simulate(engine.shape)(points(256)), 0.9))
    return reliability(engine.compiled, space(), settings or ReliabilitySettings(
        thresholds=(threshold,), methods=("form", "importance_sampling"), starts=2,
        importance=ImportanceSettings(n_samples=256)), seed=0)


def run_verify(bench: Bench, engine: Engine, folder: Path, verdict=None):
    from sensitivity.analyses.verify import VerdictSettings, verify_propagation
    from sensitivity.outputs.members import flat_mean_values, member_count

    sim, m, k = simulate(engine.shape), engine.spec.size, member_count(engine.compiled)
    members = (lambda x: np.asarray(engine.compiled.values(x)).reshape(k, len(x), -1)) if k else None
    return verify_propagation(lambda x: sim(x).reshape(len(x), -1), flat_mean_values(engine.compiled), points(64),
                              16, {"mean": np.full(m, 0.1), "std": np.full(m, 0.1)},
                              settings=verdict or VerdictSettings(), members=members, output=engine.spec)


def run_train(bench: Bench, engine: Engine, folder: Path, network=None):
    if network is None:
        return bench.trained(engine.shape).report
    return _train(engine.shape, folder, network).report


def run_simulate(bench: Bench, engine: Engine, folder: Path, runner=None):
    import xarray as xr

    from sensitivity.simulators.runner import RunnerSettings, run_simulator
    from sensitivity.surrogates.simulator import simulator_from

    shape = engine.shape
    run_simulator(simulator_from(simulate(shape), output_shape=SPECS[shape].shape), points(8), folder / "runs.nc",
                  runner or RunnerSettings(), output=SPECS[shape])
    with xr.open_dataset(folder / "runs.nc") as ds:
        return ds.load()


# --- what the contract reads off a result ------------------------------------------------------------------------


def label_problems(ds, spec: OutputSpec) -> list[str]:
    """What keeps ``ds`` from being labelled by ``spec``: its outputs on the spec's dims (each dim's labels, a string
    dim's as ``<dim>_name``, a numeric dim's units; a variable in the spec's units on them), or on one flat ``output``
    axis named by the spec's own flat names and units (``output_name``, ``output_units``)."""
    dims = spec.dim_names
    if set(dims) <= set(ds.dims):
        problems = []
        for d in spec.dims:
            labels = ds[f"{d.name}_name"] if d.is_labels else ds[d.name] if d.name in ds.coords else None
            if labels is None or [str(v) for v in labels.values] != [str(v) for v in d.values]:
                problems.append(f"dim {d.name!r}: labels {None if labels is None else labels.values.tolist()}, the "
                                f"spec's {list(d.values)}")
            elif not d.is_labels and d.units and ds[d.name].attrs.get("units") != d.units:
                problems.append(f"dim {d.name!r}: units {ds[d.name].attrs.get('units')!r}, the spec's {d.units!r}")
        own = re.compile(rf"(?<![A-Za-z]){re.escape(str(spec.units))}(?![A-Za-z])")  # m, m2, (m)-1; not mm
        if isinstance(spec.units, str) and not any(set(dims) <= set(v.dims) and own.search(str(v.attrs.get("units")))
                                                   for v in ds.data_vars.values()):
            problems.append(f"no variable on {dims} in units of the output's {spec.units!r}")
        return problems
    if "output_name" in ds.coords and ds.sizes.get("output") == spec.size:
        names, units = ds["output_name"].values.tolist(), ds.coords.get("output_units")
        return [] if names == spec.flat_names() and units is not None and units.values.tolist() == \
            spec.flat_units() else [f"flat outputs {names} ({None if units is None else units.values.tolist()}), the "
                                    f"spec's {spec.flat_names()} ({spec.flat_units()})"]
    return [f"neither the spec's dims {dims} nor its flat output names: dims {dict(ds.sizes)}"]


def spread_names(ds) -> list[str]:
    """Each result ``X`` of ``ds`` that carries the members' ``X_member``, ``X_surrogate_std`` and
    ``X_combined_interval`` (:func:`sensitivity.outputs.members.spread_variables`)."""
    return [str(v)[:-len("_surrogate_std")] for v in ds.data_vars if str(v).endswith("_surrogate_std") and
            {f"{str(v)[:-len('_surrogate_std')]}_{part}" for part in ("member", "combined_interval")} <=
            set(map(str, ds.data_vars))]


# --- the cases --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """A bad setting of one settings type: the field the one-line refusal names, and the keyword arguments of the
    study's run that hold it (made inside the test: a settings type may refuse itself as it is made)."""

    field: str
    settings: Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """How a study keeps the contract.

    Attributes
    ----------
    run
        ``(bench, engine, folder, **settings) -> result dataset``, tiny.
    bad
        A :class:`Bad` setting of each of the study's settings types, by face name
        (:meth:`sensitivity.studies.Study.face`).
    not_run
        ``{engine kind or shape: why}``: the combinations that have no meaning for the study, with the reason.
    xfail
        ``{(contract, engine kind, shape, settings type or "*"): why}``: the contracts (:data:`CONTRACTS`) it does
        not keep yet, each a strict expected failure.
    """

    run: Callable[..., Any]
    bad: dict[str, Bad]
    not_run: dict[str, str] = field(default_factory=dict)
    xfail: dict[tuple[str, str], str] = field(default_factory=dict)

    def reason_not_run(self, kind: str, shape: str) -> str | None:
        return self.not_run.get(kind) or self.not_run.get(shape)

    def reason_xfail(self, contract: str, *where: str) -> str | None:
        """Why the study does not keep ``contract`` yet at ``where`` (an engine kind, a shape, a settings type)."""
        return next((self.xfail[(contract, w)] for w in (*where, "*") if (contract, w) in self.xfail), None)


def _make(path: str, **kwargs):
    """``Bad.settings`` of the settings type at dotted ``path`` made with ``kwargs``, passed as ``key``."""
    from sensitivity.studies import resolve

    return resolve(path)(**kwargs)


_NUTS = ("the sampler traces the model's own TF function, no compiled engine: the float64 function and the ensemble's "
         "Keras members cover it; the float32 ones would add NUTS compiles for no other path")
_SIMULATOR_ONLY = "it runs the simulator, not a surrogate: no engine to vary"
_TRAINS = "it makes the ensemble the other studies run on: no engine to vary"
_CAL, _IND = "sensitivity.analyses.calibration", "sensitivity.analyses.indices"

CASES: dict[str, Case] = {
    "calibrate": Case(run_calibrate, {"Fit": Bad("level", lambda: {"fit": _make(f"{_CAL}.Fit", level=2.0)})}),
    "posterior": Case(run_posterior, {"Sampling": Bad("sampler", lambda: {
        "sampling": _make("sensitivity.analyses.posterior.Sampling", sampler="nonsense")})},
                      not_run={"keras": _NUTS, "function": _NUTS}),
    "propagate": Case(run_propagate, {"Propagation": Bad("level", lambda: {
        "propagation": _make("sensitivity.analyses.propagation.Propagation", level=2.0)})}),
    "multifidelity": Case(run_multifidelity, {"MultifidelityStudy": Bad("surrogate_rows", lambda: {
        "study": _make("sensitivity.analyses.multifidelity.MultifidelityStudy", surrogate_rows=100)})}),
    "verify": Case(run_verify, {
        "VerifyPlan": Bad("sobol_rows", lambda: {"plan": _make("sensitivity.analyses.verify.VerifyPlan",
                                                               sobol_rows=3)}),
        "RefinePlan": Bad("runs_per_round", lambda: {"plan": _make("sensitivity.analyses.verify.RefinePlan",
                                                                   runs_per_round=0)}),
        "VerdictSettings": Bad("flag_on", lambda: {"verdict": _make("sensitivity.analyses.verify.VerdictSettings",
                                                                    flag_on="nonsense")})}),
    "indices": Case(run_indices, {
        "LocalDerivatives": Bad("sigma_points", lambda: _index_method("LocalDerivatives", "local", sigma_points=-1)),
        "Dgsm": Bad("n", lambda: _index_method("Dgsm", "dgsm", n=3)),
        "Sobol": Bad("n", lambda: _index_method("Sobol", "sobol", n=3)),
        "Morris": Bad("trajectories", lambda: _index_method("Morris", "morris", trajectories=0)),
        "ActiveSubspaces": Bad("n", lambda: _index_method("ActiveSubspaces", "active_subspaces", n=0)),
        "Shapley": Bad("n_outer", lambda: _index_method("Shapley", "shapley", n_outer=0)),
        "SobolDependent": Bad("n", lambda: _index_method("SobolDependent", "sobol_dependent", n=0)),
        "Aggregated": Bad("n", lambda: _index_method("Aggregated", "aggregated", n=0)),
        "GivenData": Bad("n", lambda: _index_method("GivenData", "given_data", n=0)),
        "Intervals": Bad("method", lambda: {"intervals": _make(f"{_IND}.Intervals", method="nonsense")})}),
    "sweep": Case(run_sweep, {"Grid": Bad("kind", lambda: {"grid": _make("sensitivity.sweep.designs.make_grid",
                                                                          space=space(), kind="nonsense")}),
                              "GridDesign": Bad("kind", lambda: {"grid": _make("sensitivity.sweep.designs.GridDesign",
                                                                                kind="nonsense").grid(space())})}),
    "worth": Case(run_worth, {
        "WorthSettings": Bad("level", lambda: {"worth_settings": _make("sensitivity.analyses.worth.WorthSettings",
                                                                       level=2.0)}),
        "DesignSettings": Bad("k", lambda: {"worth_settings": _make(
            "sensitivity.analyses.worth.WorthSettings", design=_make("sensitivity.analyses.worth.DesignSettings",
                                                                     k=0))})}),
    "reliability": Case(run_reliability, {"ReliabilitySettings": Bad("starts", lambda: {"settings": _make(
        "sensitivity.analyses.reliability.ReliabilitySettings", thresholds=(1.0,), starts=0)})}),
    "train": Case(run_train, {"TrainSettings": Bad("epochs", lambda: {
        "network": _make("sensitivity.training.TrainSettings", epochs=0)})},
                  not_run={"keras": _TRAINS, "function": _TRAINS, "float64": _TRAINS}),
    "simulate": Case(run_simulate, {"RunnerSettings": Bad("batch_size", lambda: {
        "runner": _make("sensitivity.simulators.runner.RunnerSettings", batch_size=0)})},
                     not_run={"keras": _SIMULATOR_ONLY, "function": _SIMULATOR_ONLY, "ensemble": _SIMULATOR_ONLY}),
}
