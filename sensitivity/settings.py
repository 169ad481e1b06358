"""Settings of the modules that run TensorFlow, importable without it.

The command line builds its config schemas from these classes (:func:`workflows.plumbing.schema.schema_of`), so
composing a config or printing ``sensitivity --help`` does not import TensorFlow (seconds, and its log lines);
the modules that run them, :mod:`sensitivity.engine.jacobian`, :mod:`sensitivity.training` and
:mod:`sensitivity.interop.export`, take their settings and defaults from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from sensitivity.errors import ConfigError

#: Smooth activations of the surrogate MLP (the Jacobian of a ReLU network is piecewise constant).
ACTIVATIONS = ("gelu", "tanh", "silu", "softplus", "elu")

Mode = Literal["auto", "forward", "reverse"]
#: Differentiation modes of the Jacobian engine (see :func:`sensitivity.engine.modes.resolve_mode`).
MODES: tuple[str, ...] = get_args(Mode)
PathChoice = Literal["auto", "dense", "autodiff"]
#: Paths of the Jacobian engine: the dense path (MLPs; conv chains, with pooling in reverse mode), generic
#: autodiff, or the first that fits.
PATHS: tuple[str, ...] = get_args(PathChoice)
Dtype = Literal["float32", "float64"]
#: Compute dtypes of a surrogate and its engines.
DTYPES: tuple[str, ...] = get_args(Dtype)
#: Working memory of the compiled Hessian (:func:`sensitivity.engine.hessian.compile_hessian`): rows of the expanded batch.
HESSIAN_MAX_ROWS = 16384


@dataclass(frozen=True)
class EngineSettings:
    """How :func:`sensitivity.engine.jacobian.compile_jacobian` compiles a surrogate's values and Jacobian.

    Parameters
    ----------
    mode
        ``"forward"`` (cost ~ n_in tangents), ``"reverse"`` (cost ~ n_out cotangents) or ``"auto"``:
        forward when ``n_in <= n_out``. One of :data:`MODES`.
    dtype
        Compute dtype of the surrogate, hence of the engine (:func:`sensitivity.surrogates.load.load_surrogate`);
        one of :data:`DTYPES`.
    jit_compile
        Compile full chunks with XLA; ``None``: the engine's choice (XLA for full chunks; shorter chunks never
        wait for a compile).
    chunk_size
        Points per compiled call [points]; ``None``: derived from ``memory_budget_mb`` and the model's
        per-point activation size.
    memory_budget_mb
        Working memory allowed for one chunk [MiB]: intermediate tangents plus outputs (autodiff path).
    path
        ``"dense"`` (a Keras MLP, or a chain with convolutions, and in reverse mode max pooling too),
        ``"autodiff"`` (any model) or ``"auto"``: dense whenever :mod:`sensitivity.engine.dense_path` (or in reverse
        mode through convolutions :mod:`sensitivity.engine.reverse_path`) recognises the model. One of :data:`PATHS`.
    """

    mode: Mode = "auto"
    dtype: Dtype = "float32"
    jit_compile: bool | None = None
    chunk_size: int | None = None
    memory_budget_mb: float = 1024.0
    path: PathChoice = "auto"


#: The smallest working memory a chunk may be given [MiB].
MIN_MEMORY_BUDGET_MB = 1.0


def check_memory_budget(memory_budget_mb: float) -> float:
    """``memory_budget_mb`` [MiB] as a float, or a one-line :class:`ConfigError`: a finite number of at least
    :data:`MIN_MEMORY_BUDGET_MB` and at most this machine's physical memory."""
    import math
    import os

    value = memory_budget_mb
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"`jacobian.memory_budget_mb` must be a finite number of MiB, got {value!r}")
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 if hasattr(os, "sysconf") else math.inf
    if not MIN_MEMORY_BUDGET_MB <= value <= physical:
        raise ConfigError(f"`jacobian.memory_budget_mb` must lie in [{MIN_MEMORY_BUDGET_MB:g}, {physical:.0f}] MiB "
                          f"(this machine's memory), got {value!r}")
    return float(value)


def check_points_per_part(points_per_part: int | None) -> int | None:
    """``points_per_part`` (points per part file of a sweep) as it is, or a one-line :class:`ConfigError`: None
    (the sweep's choice) or a whole number of at least 1."""
    value = points_per_part
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"`points_per_part` must be a whole number of points >= 1 (or null: about 64 MiB per "
                          f"part), got {value!r}")
    return value


@dataclass(frozen=True)
class TrainSettings:
    """Architecture and optimisation of the surrogate MLP.

    Parameters
    ----------
    hidden
        Width of each hidden layer.
    activation
        A smooth activation (the Jacobian of a ReLU network is piecewise constant): one of :data:`ACTIVATIONS`.
    learning_rate
        Initial Adam step; halved when the validation loss stalls for ``patience // 4`` epochs.
    batch_size
        Samples per gradient step.
    epochs
        Upper limit on epochs; early stopping on the validation loss usually ends sooner.
    patience
        Epochs without validation improvement before stopping (the best weights are restored).
    log_inputs
        Parameters whose natural log the network sees (e.g. those on a log scale; need > 0).
    log_output
        Learn the log of the outputs (needs every training output > 0; good for quantities spanning decades).
    jacobian_weight
        Sobolev training (Czarnecki et al. 2017, arXiv:1706.04859): the loss is the value MSE plus this weight times
        the Jacobian MSE, both on the network's normalised scale (:func:`sensitivity.training.normalised_jacobian`);
        the targets come from a simulator Jacobian function, else from central differences of the simulator
        (``2 n`` runs per training and validation sample, :class:`TrainingPlan` ``fd_step``). 0: values only [1].
    conv
        A convolutional trunk over a field of inputs ahead of the hidden layers (:class:`ConvTrunk`); None: an MLP.
    """

    hidden: tuple[int, ...] = (128, 128)
    activation: str = "gelu"
    learning_rate: float = 3e-3
    batch_size: int = 64
    epochs: int = 2000
    patience: int = 100
    log_inputs: tuple[str, ...] = ()
    log_output: bool = False
    jacobian_weight: float = 0.0
    conv: ConvTrunk | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(self.hidden))
        object.__setattr__(self, "log_inputs", tuple(self.log_inputs))
        if not self.hidden or any(not isinstance(w, int) or w < 1 for w in self.hidden):
            raise ConfigError(f"`hidden` must list positive layer widths, got {list(self.hidden)}")
        if self.activation not in ACTIVATIONS:
            raise ConfigError(f"`activation` must be one of {ACTIVATIONS} (smooth, so derivatives exist), "
                              f"got {self.activation!r}")
        for key in ("learning_rate", "batch_size", "epochs", "patience"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"`{key}` must be > 0, got {getattr(self, key)!r}")
        weight = self.jacobian_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight < float("inf"):
            raise ConfigError(f"`jacobian_weight` must be a finite number >= 0, got {weight!r}")


@dataclass(frozen=True)
class ConvTrunk:
    """A convolutional trunk over one field of inputs, ahead of the surrogate's Dense layers
    (:mod:`sensitivity.training.conv`).

    Parameters
    ----------
    field
        The field's name: its cells are the parameters named ``<field>_*``, in the space's order, row by row
        (:func:`sensitivity.inputs.fields.field_cells`).
    shape
        The field's shape, one size (a 1-D field: ``Conv1D``) or two (``Conv2D``) [cells].
    filters
        Channels of each convolution layer (``padding="same"``, the network's activation).
    kernel_size
        Width of every convolution window [cells].
    """

    field: str
    shape: tuple[int, ...]
    filters: tuple[int, ...] = (16, 16)
    kernel_size: int = 3

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "filters", tuple(self.filters))
        if not 1 <= len(self.shape) <= 2 or any(not isinstance(s, int) or s < 1 for s in self.shape):
            raise ConfigError(f"`input_fields.{self.field}`: a convolutional trunk needs a shape of one or two "
                              f"positive sizes, got {list(self.shape)}")
        if not self.filters or any(not isinstance(f, int) or f < 1 for f in self.filters):
            raise ConfigError(f"`filters` must list positive channel counts, got {list(self.filters)}")
        if isinstance(self.kernel_size, bool) or not isinstance(self.kernel_size, int) or self.kernel_size < 1:
            raise ConfigError(f"`kernel_size` must be a positive integer, got {self.kernel_size!r}")


@dataclass(frozen=True)
class TrainingPlan:
    """How :func:`sensitivity.training.train_surrogate` uses the samples: the split and the derivative check.

    Parameters
    ----------
    validation_fraction
        Share of the samples held out to stop training early, in (0, 1).
    test_fraction
        Share of the samples held out for the report, in (0, 1); never seen by the fit.
    derivative_points
        Test samples whose Jacobians are checked against float64 central differences of the simulator
        (when one is given) [points].
    fd_step
        Central-difference step, as a fraction of each parameter's range in the design's unit cube [1]: the step of
        parameter ``j`` is ``fd_step * (high_j - low_j)``, or ``fd_step * x_j log(high_j / low_j)`` for a
        ``scale: log`` parameter (:func:`sensitivity.training.unit_cube_scale`). The derivative check and, with
        ``TrainSettings.jacobian_weight > 0`` and no simulator Jacobian, the Sobolev targets use it.
    members
        Networks ``K`` of the ensemble (1: one model, saved as ``surrogate.keras``; more: an ensemble directory
        ``surrogate.ensemble``, :mod:`sensitivity.surrogates.ensemble`), trained from seeds ``seed + k``.
    bootstrap
        Train each member of an ensemble on its own bootstrap resample of the training samples (drawn with
        replacement; validation and test samples are shared), so that the members' spread carries the
        sampling error of the data as well as that of the initialisation.
    calibrate_spread
        Scale an ensemble's spread, per output, so that on the validation samples the predictive variance
        ``(1 + 1/K) s^2`` of the members matches the ensemble mean's squared error (:mod:`sensitivity.surrogates.ensemble`;
        recorded in the manifest as ``spread_scale``). Deep ensembles are often over-confident; the test samples
        then check the calibrated spread against the errors it did not see.
    level
        Probability of an ensemble's interval about its test predictions, ``prediction_combined_interval`` of the
        report (:func:`sensitivity.outputs.members.spread_variables`), in (0, 1).
    """

    validation_fraction: float = 0.15
    test_fraction: float = 0.1
    derivative_points: int = 64
    fd_step: float = 1.0e-3
    members: int = 5
    bootstrap: bool = True
    calibrate_spread: bool = True
    level: float = 0.95

    def __post_init__(self) -> None:  # the fractions are checked where the samples are split
        if isinstance(self.derivative_points, bool) or not isinstance(self.derivative_points, int) \
                or self.derivative_points < 0:
            raise ConfigError(f"`derivative_points` must be an integer >= 0, got {self.derivative_points!r}")
        if not self.fd_step > 0:
            raise ConfigError(f"`fd_step` must be > 0, got {self.fd_step!r}")
        if isinstance(self.members, bool) or not isinstance(self.members, int) or self.members < 1:
            raise ConfigError(f"`members` must be an integer >= 1, got {self.members!r}")
        if not 0 < self.level < 1:
            raise ConfigError(f"`level` must lie in (0, 1), got {self.level!r}")

    @property
    def saved_name(self) -> str:
        """What the trained surrogate is saved as: ``surrogate.keras`` (one member) or the ensemble directory
        ``surrogate.ensemble`` (more)."""
        return "surrogate.keras" if self.members == 1 else "surrogate.ensemble"


@dataclass(frozen=True)
class Thresholds:
    """When to warn: any output's test ``R^2`` below ``r2``, or median relative Jacobian error above ``jacobian``."""

    r2: float = 0.99
    jacobian: float = 0.1


#: The export check's least tolerance, in ulps of the engine's dtype (``rtol=None``; see
#: :func:`sensitivity.interop.export.float_tolerance`).
EXPORT_ULPS = 16
#: The export check's tolerance as a multiple of the chain's measured rounding noise (``rtol=None``).
EXPORT_NOISE_FACTOR = 4.0


@dataclass(frozen=True)
class ExportSettings:
    """How :func:`sensitivity.interop.export.export_jacobian` exports and checks a compiled Jacobian.

    Parameters
    ----------
    hessian
        Also export the ``hessian`` function (``[N, *out, n_in, n_in]``).
    rtol
        Tolerance on ``max |reloaded - engine| / max |engine|`` of values, Jacobians and Hessians [1]; ``None``:
        derived from the arithmetic the artifact computes in
        (:func:`sensitivity.interop.export.float_tolerance`: :data:`EXPORT_ULPS` ulps of the engine's dtype, or
        :data:`EXPORT_NOISE_FACTOR` times the chain's measured rounding noise when that is larger).
    bench_seconds
        Time spent measuring each throughput on one chunk of ``jac.chunk_size`` points [s] (0: skip).
    hessian_points
        How many check points to compare Hessians on (0: none; ignored when none was exported).
    """

    hessian: bool = True
    rtol: float | None = None
    bench_seconds: float = 2.0
    hessian_points: int = 8
