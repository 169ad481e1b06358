"""Input and output scaling that travels inside a surrogate.

A network is trained on normalised inputs and outputs; a scientist wants
Jacobians in physical units. The affine maps (and optional log transforms) here
sit INSIDE the model that the engine compiles, so autodiff carries the chain
rule through them and every derivative comes out in physical units.

The Keras layers store the parameter and output names and units in their
config, so a saved ``.keras`` file is self-describing and loads in
``safe_mode`` (no lambdas, registered classes only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import keras
import numpy as np
from keras import ops


def log_where(x: Any, log_mask: Any) -> Any:
    """``log x`` where ``log_mask`` (broadcast against ``x``), ``x`` elsewhere (where no log of it is taken)."""
    return ops.where(log_mask, ops.log(ops.where(log_mask, x, ops.ones_like(x))), x)


def scale_inputs(x: Any, offset: Any, scale: Any, log_mask: Any) -> Any:
    """Physical inputs -> network inputs: ``(t(x) - offset) / scale`` with ``t = log`` where ``log_mask``."""
    return (log_where(x, log_mask) - offset) / scale


def unscale_outputs(z: Any, offset: Any, scale: Any, log: bool) -> Any:
    """Network outputs -> physical outputs: ``z * scale + offset``, exponentiated when ``log``."""
    y = z * scale + offset
    return ops.exp(y) if log else y


@dataclass(frozen=True, eq=False)
class ScaledModel:
    """A model in normalised units wrapped in a config's scaling (``model.scaling``): physical inputs ``x [B, n_in]``
    -> :func:`scale_inputs` -> ``model`` -> :func:`unscale_outputs` -> physical outputs.

    The engine reads the two maps as steps of the model's chain (:func:`sensitivity.engine.layers.layer_steps`):
    the log transform of ``input_log`` inputs and the exponential of ``output_log`` as elementwise steps, the
    affine maps as diagonal affine ones, folded into the first and last Dense kernels where they touch one.

    Attributes
    ----------
    model
        The model in normalised units (a Keras model, or a function calling one).
    input_offset, input_scale
        ``[n_in]``: normalised input ``(t(x) - offset) / scale``, ``t = log`` where ``input_log`` ``[n_in]`` (bool).
    output_offset, output_scale
        Broadcast against the model's outputs ``[B, *out]``: physical output ``z scale + offset``, exponentiated
        when ``output_log``.
    """

    model: Callable[[Any], Any]
    input_offset: np.ndarray
    input_scale: np.ndarray
    input_log: np.ndarray
    output_offset: np.ndarray
    output_scale: np.ndarray
    output_log: bool

    def __call__(self, x: Any) -> Any:
        dtype = x.dtype
        z = self.model(scale_inputs(x, ops.convert_to_tensor(self.input_offset, dtype),
                                    ops.convert_to_tensor(self.input_scale, dtype), self.input_log))
        return unscale_outputs(z, ops.convert_to_tensor(self.output_offset, dtype),
                               ops.convert_to_tensor(self.output_scale, dtype), self.output_log)


@keras.saving.register_keras_serializable(package="sensitivity")
class InputScaling(keras.layers.Layer):
    """Normalise physical inputs; carries the parameter names and units.

    Parameters
    ----------
    offset, scale
        Per-input affine map applied after the optional log transform.
    log
        Per-input flags: take the natural log of the physical value first (needs ``x > 0``).
    names, units
        The parameters' names and UDUNITS-2 units, in input order.
    """

    def __init__(self, offset: Sequence[float], scale: Sequence[float], log: Sequence[bool],
                 names: Sequence[str] = (), units: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.offset, self.scale, self.log = list(map(float, offset)), list(map(float, scale)), list(map(bool, log))
        self.names, self.units = list(names), list(units)

    def call(self, x: Any) -> Any:
        dtype = x.dtype
        return scale_inputs(x, ops.convert_to_tensor(np.asarray(self.offset), dtype),
                            ops.convert_to_tensor(np.asarray(self.scale), dtype), np.asarray(self.log))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "offset": self.offset, "scale": self.scale, "log": self.log,
                "names": self.names, "units": self.units}


@keras.saving.register_keras_serializable(package="sensitivity")
class OutputScaling(keras.layers.Layer):
    """Map normalised network outputs back to physical outputs; carries the output description.

    Parameters
    ----------
    offset, scale
        Per-output affine map (flattened over the output shape).
    log
        Exponentiate after the affine map (the network learned ``log y``).
    output_spec
        The output description as plain data (see :meth:`sensitivity.surrogates.load.OutputSpec.to_dict`).
    """

    def __init__(self, offset: Sequence[float], scale: Sequence[float], log: bool = False,
                 output_spec: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.offset, self.scale, self.log = list(map(float, offset)), list(map(float, scale)), bool(log)
        self.output_spec = output_spec or {}

    def call(self, z: Any) -> Any:
        dtype = z.dtype
        return unscale_outputs(z, ops.convert_to_tensor(np.asarray(self.offset), dtype),
                               ops.convert_to_tensor(np.asarray(self.scale), dtype), self.log)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "offset": self.offset, "scale": self.scale, "log": self.log,
                "output_spec": self.output_spec}
