"""Surrogates: a Keras file, a TF SavedModel, an importable TF-traceable function, or an ensemble of Keras files.

:func:`load_surrogate` turns any of them into a :class:`Surrogate`: a
TensorFlow-traceable map from physical parameters ``[B, n_in]`` to physical
outputs ``[B, *output.shape]``, with the input and output names and units, and a
content hash for provenance. Input/output scaling (from the config, or the
:mod:`sensitivity.surrogates.scaling` layers saved inside a trained model) is folded into
that map, so the compiled Jacobian is in physical units. An ensemble directory
(:mod:`sensitivity.surrogates.ensemble`) loads as one surrogate whose map is the mean of its members, with the
members kept beside it (``members``, ``member_fn``) for the analyses that report their spread.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import logging
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError, ModelError
from sensitivity.outputs.spec import OutputSpec
from sensitivity.settings import DTYPES, EngineSettings
from sensitivity.units import check_units

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Surrogate:
    """A differentiable model in physical units.

    Attributes
    ----------
    fn
        TF-traceable callable ``x [B, n_in] -> y [B, *output.shape]`` in the compute dtype.
    input_names, input_units
        Parameter names and UDUNITS-2 units in input order.
    output
        Output names, dims, coordinates and units.
    dtype
        Compute dtype, ``"float32"`` or ``"float64"``.
    source
        Where it came from (path or ``module:function``).
    content_hash
        SHA-256 of the model file(s) or function source and arguments, for provenance; of its manifest for an
        ensemble (which records every member's).
    members
        An ensemble's members, each a single-model :class:`Surrogate` (``fn`` is then their mean); empty for
        one model.
    spread_scale
        An ensemble's calibration of its spread, one factor per flat output (:mod:`sensitivity.surrogates.ensemble`): every
        analysis sees the members spread about their mean by it (:func:`recentred`); empty: as trained.
    """

    fn: Callable[[Any], Any]
    input_names: tuple[str, ...]
    input_units: tuple[str, ...]
    output: OutputSpec
    dtype: str
    source: str
    content_hash: str
    members: tuple["Surrogate", ...] = ()
    spread_scale: tuple[float, ...] = ()

    @property
    def n_in(self) -> int:
        return len(self.input_names)

    @property
    def output_size(self) -> int:
        return self.output.size

    @property
    def n_members(self) -> int:
        """Members of an ensemble ``K`` (1 for a single model)."""
        return max(1, len(self.members))

    def member_fn(self, x: Any) -> Any:
        """Every member's outputs at ``x [B, n_in]``: ``[K, B, *output.shape]`` (``K = 1`` for a single model),
        spread about their mean by ``spread_scale``."""
        import tensorflow as tf

        if not self.members:
            return self.fn(x)[None]
        stacked = tf.stack([m.fn(x) for m in self.members])
        if not self.spread_scale:
            return stacked
        return recentred(stacked, tf.constant(np.reshape(self.spread_scale, self.output.shape), x.dtype))

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """Evaluate eagerly on ``[N, n_in]`` points (no compilation: use the engine for speed)."""
        import tensorflow as tf

        return self.fn(tf.convert_to_tensor(np.asarray(points), dtype=self.dtype)).numpy()


def recentred(stacked: Any, scale: Any) -> Any:
    """Members ``[K, B, ...]`` spread about their mean by ``scale`` (broadcast over their trailing axes):
    ``mean + scale (y_k - mean)``. The mean is unchanged; the members' deviations from it, values and Jacobians
    alike, are multiplied by ``scale``."""
    import tensorflow as tf

    mean = tf.reduce_mean(stacked, axis=0, keepdims=True)
    return mean + scale * (stacked - mean)


def load_surrogate(
    source: str | Path | Callable[..., Any],
    *,
    input_names: Sequence[str] | None = None,
    input_units: Sequence[str] | None = None,
    output: OutputSpec | Mapping[str, Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    scaling: Mapping[str, Any] | None = None,
    dtype: str = EngineSettings.dtype,
    trusted: bool = False,
) -> Surrogate:
    """Load a surrogate and check it against its declared inputs and outputs.

    Parameters
    ----------
    source
        A ``.keras`` file (loaded with ``safe_mode=True``), a TF SavedModel directory, an ensemble directory
        of ``.keras`` members with its manifest (:mod:`sensitivity.surrogates.ensemble`; every member's hash verified), an
        importable ``"package.module:function"`` string, or a Python callable; functions take ``x [B, n_in]``
        and return ``[B, ...]`` with TensorFlow ops.
    input_names, input_units
        Parameter names and units in input order. Optional for a model trained by this package (they are
        stored inside it); when both are given they must agree.
    output
        Output description (an :class:`OutputSpec` or its dict form). Stored inside trained models;
        a generic one (``y0, y1, ...``, units ``"1"``) is used, with a warning, when there is none.
    kwargs
        Keyword arguments bound to a function source (e.g. ``{"a": 7, "b": 0.1}``).
    scaling
        Optional ``{"input": {"offset", "scale", "log"}, "output": {"offset", "scale", "log"}}`` wrapped
        around a model that works in normalised units; ``log`` of ``input`` lists parameter names.
    dtype
        Compute dtype (one of :data:`~sensitivity.settings.DTYPES`; default: the engine's,
        :class:`~sensitivity.settings.EngineSettings`). ``"float64"`` rebuilds a Keras model in float64; a SavedModel
        computes in its own dtype.
    trusted
        Required for a SavedModel directory: loading one runs its graph, which may hold any TF op (file
        writes included); a SavedModel is a program, and Keras' ``safe_mode`` does not apply to it.

    Returns
    -------
    Surrogate
    """
    import tensorflow as tf

    from sensitivity.surrogates.ensemble import is_ensemble

    if dtype not in DTYPES:
        raise ConfigError(f"`dtype` must be one of {DTYPES}, got {dtype!r}")
    if not callable(source) and is_ensemble(source):
        return _load_ensemble(Path(source), input_names=input_names, input_units=input_units, output=output,
                              scaling=scaling, dtype=dtype)
    fn, meta, content_hash, label = _load_callable(source, dtype, dict(kwargs or {}), trusted)
    names = _reconcile("input_names", meta.get("input_names"), input_names)
    units = _reconcile("input_units", meta.get("input_units"), input_units)
    missing = [f"`{key}`" for key, given in (("input_names", names), ("input_units", units)) if given is None]
    if missing:  # every one at once, so a user's own model is fixed in one go
        raise ModelError(f"surrogate {label}: {' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} required "
                         f"(the model does not store {'them' if len(missing) > 1 else 'it'})")
    if len(units) != len(names):
        raise ModelError(f"surrogate {label}: {len(names)} input names but {len(units)} input units")
    for name, u in zip(names, units):
        check_units(u, where=f"input {name!r}: `units`")
    if scaling:
        fn = _wrap_scaling(fn, scaling, names)

    try:
        probe = fn(tf.ones([2, len(names)], dtype=dtype))
    except Exception as err:  # any failure of user code on a probe batch
        raise ModelError(f"surrogate {label} fails on a probe batch [2, {len(names)}]: {type(err).__name__}: {err}") from None
    fn = _in_dtype(fn, probe.dtype, dtype, label)
    shape = tuple(int(s) for s in probe.shape[1:])
    if probe.shape[0] != 2:
        raise ModelError(
            f"surrogate {label}: expected outputs [B, ...] for inputs [B, {len(names)}], got {list(probe.shape)}"
        )
    spec = output if output is not None else meta.get("output")
    if not shape:  # one scalar per point, y [B]: one output named after the model, y [B, 1]
        fn, shape = _one_column(fn), (1,)
        spec = _scalar_spec(spec, label)
    if spec is None:
        log.warning("surrogate %s: no output description given; using generic labels and units '1'", label)
        spec = OutputSpec.generic(shape)
    spec = spec if isinstance(spec, OutputSpec) else OutputSpec.from_dict(spec)
    if spec.shape != shape:
        raise ModelError(
            f"surrogate {label}: the model returns shape {list(shape)} per point but `output` declares "
            f"{list(spec.shape)} (dims {list(spec.dim_names)})"
        )
    return Surrogate(fn, tuple(names), tuple(units), spec, dtype, label, content_hash)


def _load_ensemble(path: Path, **options: Any) -> Surrogate:
    """The ensemble directory ``path`` as one surrogate: the mean of its verified members, which it keeps.

    Every member must declare the same inputs, units and outputs (checked here, naming the member).
    """
    import tensorflow as tf

    from sensitivity.surrogates.ensemble import read_manifest

    manifest = read_manifest(path)
    members = tuple(load_surrogate(file, **options) for file in manifest.members)
    first = members[0]
    for k, member in enumerate(members[1:], start=1):
        for what in ("input_names", "input_units", "output", "dtype"):
            if getattr(member, what) != getattr(first, what):
                raise ModelError(f"surrogate ensemble {path}: member {k} has {what} {getattr(member, what)!r}, "
                                 f"member 0 {getattr(first, what)!r}")
    weight = 1.0 / len(members)

    def mean(x: Any) -> Any:
        return tf.add_n([m.fn(x) for m in members]) * tf.constant(weight, x.dtype)

    scale = manifest.info.get("spread_scale") or ()
    if scale and len(scale) != first.output_size:
        raise ModelError(f"surrogate ensemble {path}: `spread_scale` has {len(scale)} entries, the members "
                         f"{first.output_size} outputs")
    return Surrogate(mean, first.input_names, first.input_units, first.output, first.dtype, str(path),
                     manifest.content_hash, members, tuple(float(v) for v in scale))


def _in_dtype(fn: Callable, returned: Any, dtype: str, label: str) -> Callable:
    """``fn`` with its outputs cast to the compute ``dtype`` when it returns another float dtype (a float64 model
    under the float32 engine), said once in the log; ``fn`` itself when it returns ``dtype``.

    The engine's chains (Jacobians, Hessians) combine the outputs with tensors of the compute dtype, which
    TensorFlow never promotes: the cast at the model's boundary is what they see.

    Raises
    ------
    ModelError
        The model returns a non-float dtype (integers have no derivative).
    """
    import tensorflow as tf

    if returned.name == dtype:
        return fn
    if not returned.is_floating:
        raise ModelError(f"surrogate {label} returns {returned.name} values; a model must return floats ({dtype})")
    log.info("surrogate %s returns %s; its outputs are cast to the engine's %s", label, returned.name, dtype)

    def cast(x: Any) -> Any:
        return tf.cast(fn(x), x.dtype)

    return cast


def _one_column(fn: Callable) -> Callable:
    """``fn`` with its outputs ``[B]`` as one column ``[B, 1]``."""
    def column(x: Any) -> Any:
        return fn(x)[:, None]

    return column


def _scalar_spec(spec: OutputSpec | Mapping[str, Any] | None, label: str) -> OutputSpec:
    """The output description of a scalar model: an ``output`` dim with one label, the output's name.

    The name is ``spec``'s when given (``{name: H, units: m}``), else the model's (function name or file stem).
    """
    if isinstance(spec, OutputSpec):
        spec = spec.to_dict()
    spec = dict(spec or {})
    if spec.get("dims"):
        return OutputSpec.from_dict(spec)  # a declared [1] shape: checked against the model as usual
    if "name" not in spec:
        name = label.rpartition(":")[2] if ":" in label else label
        name = Path(name).stem if "/" in name or name.endswith(".keras") else name.rpartition(".")[2]
        stem = re.sub(r"\W", "_", name)
        spec["name"] = stem if stem.isidentifier() else "y"
    return OutputSpec.from_dict(spec)


def _reconcile(field: str, stored: Sequence[str] | None, given: Sequence[str] | None) -> tuple[str, ...] | None:
    if stored and given and list(stored) != list(given):
        raise ModelError(f"`{field}` {list(given)} disagree with those stored in the model {list(stored)}")
    chosen = given or stored
    return tuple(chosen) if chosen else None


def _load_callable(source: Any, dtype: str, kwargs: dict[str, Any], trusted: bool) -> tuple[Callable, dict, str, str]:
    """Return ``(fn, stored metadata, content hash, label)`` for any supported source."""
    if callable(source):
        fn = bind_checked(source, kwargs, getattr(source, "__qualname__", repr(source)))
        return fn, {}, _function_hash(source, kwargs), getattr(source, "__qualname__", repr(source))
    text = str(source)
    path = Path(text)
    if path.suffix == ".keras" and not path.is_dir():
        if not path.is_file():
            raise ModelError(f"surrogate file not found: {text}")
        if not os.access(path, os.R_OK):
            raise ModelError(f"surrogate file {text} cannot be read: permission denied")
        fn, meta = _load_keras(path, dtype)
        return fn, meta, _file_hash([path]), text
    if path.is_dir():
        if not (path / "saved_model.pb").is_file():
            raise ModelError(f"surrogate {text} is a directory but not a TF SavedModel (no saved_model.pb); give a "
                             ".keras file, a SavedModel directory or 'package.module:function'")
        if not trusted:
            raise ModelError(f"surrogate directory {text} is a TF SavedModel: loading it runs its graph, a program "
                             "that may do anything (Keras safe_mode does not apply); load it only from a source you "
                             "trust, with model.trusted=true (trusted=True), or save the model as .keras")
        return _load_saved_model(path, dtype), {}, _file_hash(sorted(p for p in path.rglob("*") if p.is_file())), text
    if ":" in text and not path.exists():
        target = import_callable(text, what="surrogate function")
        return bind_checked(target, kwargs, text), {}, _function_hash(target, kwargs), text
    raise ModelError(
        f"surrogate source {text!r} is neither a .keras file, a SavedModel directory nor 'package.module:function'"
    )


def import_callable(source: str, *, what: str) -> Callable:
    """The callable named ``"package.module:function"``, imported from ``sys.path`` (the command line puts the
    working directory first, so a study's own module imports).

    Raises
    ------
    ModelError
        ``source`` is not of that form, or the module or the name cannot be imported (``what`` names it).
    """
    module_name, _, attr = source.partition(":")
    if not module_name or not attr:
        raise ModelError(f"{what} must be 'package.module:function', got {source!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, SyntaxError) as err:  # SyntaxError: a broken user module
        raise ModelError(f"{what} {source!r} cannot be imported: {type(err).__name__}: {err}") from None


def bind_checked(fn: Callable, kwargs: Mapping[str, Any], label: str, *, what: str = "model `kwargs`",
                 hint: str = "left over from another model? start from model=function") -> Callable:
    """``fn`` with ``kwargs`` bound, after checking each key against its signature (a key left over from
    another model's config fails here, naming ``what``, the key and ``hint``, not as a TypeError deep in a trace)."""
    if not kwargs:
        return fn
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable without a signature: let the call decide
        return functools.partial(fn, **kwargs)
    parameters = signature.parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        accepted = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)][1:]
        for key in kwargs:
            if key not in accepted:
                raise ConfigError(f"{what}: {key!r} is not a parameter of {label}{signature} (takes "
                                  f"{accepted or 'none'}; {hint})")
    return functools.partial(fn, **kwargs)


def _load_keras(path: Path, dtype: str) -> tuple[Callable, dict]:
    import keras

    import sensitivity.surrogates.scaling  # noqa: F401  (registers the scaling layers for safe_mode loading)

    if not zipfile.is_zipfile(path):  # Keras reports a truncated archive as "File not found"
        raise ModelError(f"surrogate file {path} is not a valid .keras archive (truncated or damaged: not a zip "
                         "file); save or copy it again")
    try:
        model = keras.saving.load_model(path, safe_mode=True, compile=False)
    except Exception as err:  # keras raises many types for corrupt or unsafe files
        raise ModelError(f"surrogate file {path} cannot be loaded by Keras (safe mode: no code of the file is run): "
                         f"{keras_reason(err)}") from None
    if model.dtype != dtype:
        model = _keras_in_dtype(model, dtype)
    meta: dict[str, Any] = {}
    for layer in model.layers:
        if layer.__class__.__name__ == "InputScaling" and layer.names:
            meta.update(input_names=layer.names, input_units=layer.units)
        if layer.__class__.__name__ == "OutputScaling" and layer.output_spec:
            meta["output"] = layer.output_spec
    return (lambda x: model(x, training=False)), meta


def keras_reason(error: Exception) -> str:
    """Keras' refusal of a file in one line: the innermost of its nested messages (each layer that could not be
    rebuilt repeats its whole config), its first sentence (a Lambda layer, an activation ``os.system``)."""
    innermost = str(error).rpartition("Exception encountered: ")[2]
    line = next((s.strip() for s in innermost.splitlines() if s.strip()), type(error).__name__)
    return re.split(r"(?<=[.])\s+(?=[A-Z])", line, maxsplit=1)[0]


def _keras_in_dtype(model: Any, dtype: str) -> Any:
    """Rebuild a Keras model with every layer computing in ``dtype`` and the same weights."""
    import keras

    def retype(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (dtype if k == "dtype" and v is not None else retype(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [retype(v) for v in node]
        return node

    config = keras.saving.serialize_keras_object(model)
    rebuilt = keras.saving.deserialize_keras_object(retype(config), safe_mode=True)
    rebuilt.set_weights([w.astype(dtype) for w in model.get_weights()])
    return rebuilt


def _load_saved_model(path: Path, dtype: str) -> Callable:
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    signatures = dict(loaded.signatures)
    name = next((s for s in ("serving_default", "serve") if s in signatures), None)
    if name is None:
        raise ModelError(f"SavedModel {path} has no 'serving_default' or 'serve' signature; it has {list(signatures)}")
    signature = signatures[name]
    (input_key, input_spec), = signature.structured_input_signature[1].items()
    outputs = list(signature.structured_outputs)
    if len(outputs) != 1:
        raise ModelError(f"SavedModel {path}: signature {name!r} must have one output, has {outputs}")
    model_dtype = input_spec.dtype
    if model_dtype.name != dtype:
        log.warning("SavedModel %s computes in %s; casting to and from %s", path, model_dtype.name, dtype)

    def fn(x: Any) -> Any:
        # through `loaded`, so the restored variables live as long as this function
        y = loaded.signatures[name](**{input_key: tf.cast(x, model_dtype)})[outputs[0]]
        return tf.cast(y, x.dtype)

    return fn


def _wrap_scaling(fn: Callable, scaling: Mapping[str, Any], names: Sequence[str]) -> Callable:
    """Fold a config-given normalisation around ``fn`` (physical -> normalised -> model -> physical), as a
    :class:`~sensitivity.surrogates.scaling.ScaledModel` that the engine reads as more steps of the model's chain."""
    from sensitivity.surrogates.scaling import ScaledModel

    unknown = set(scaling) - {"input", "output"}
    if unknown:
        raise ConfigError(f"scaling: unknown key(s) {sorted(unknown)}")
    n = len(names)
    inp = dict(scaling.get("input") or {})
    out = dict(scaling.get("output") or {})
    log_names = list(inp.get("log") or [])
    for name in log_names:
        if name not in names:
            raise ConfigError(f"scaling.input.log: unknown parameter {name!r}; the inputs are {list(names)}")
    in_offset = np.broadcast_to(np.asarray(inp.get("offset", 0.0), float), (n,))
    in_scale = np.broadcast_to(np.asarray(inp.get("scale", 1.0), float), (n,))
    log_mask = np.array([name in log_names for name in names])
    for key, values in (("scaling.input.scale", in_scale), ("scaling.output.scale", np.asarray(out.get("scale", 1.0)))):
        if np.any(np.asarray(values) == 0):
            raise ConfigError(f"`{key}` must be non-zero, got {np.asarray(values).tolist()}")
    return ScaledModel(fn, in_offset, in_scale, log_mask, np.asarray(out.get("offset", 0.0), float),
                       np.asarray(out.get("scale", 1.0), float), bool(out.get("log", False)))


def _file_hash(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for p in paths:
        digest.update(p.name.encode())
        digest.update(p.read_bytes())
    return "sha256:" + digest.hexdigest()


def _function_hash(fn: Callable, kwargs: Mapping[str, Any]) -> str:
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = getattr(fn, "__qualname__", repr(fn))
    digest = hashlib.sha256(text.encode())
    digest.update(json.dumps(kwargs, sort_keys=True, default=str).encode())
    return "sha256:" + digest.hexdigest()
