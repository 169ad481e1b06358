"""A convolutional trunk over a field of inputs, for a surrogate of a simulator whose inputs are a field
(``input_fields``: a 1-D profile or a 2-D map of cells, plus any other inputs).

The trunk is a chain of layers the engine's fast paths read (:mod:`sensitivity.engine.layers`), so the trained
surrogate's Jacobian takes the dense or reverse path, not autodiff: a fixed linear ``field_layout`` (a Dense layer
without bias, not trained) lays the scaled inputs out on the field's grid, the field as channel 0 and each other
input as one more channel, constant over the grid (its value at every cell); a ``Reshape`` to ``[*shape, channels]``;
``Conv1D`` (a 1-D field) or ``Conv2D`` (2-D) layers with ``padding="same"``; a ``Flatten``, after which the
network's Dense layers follow. The other inputs enter the trunk as constant channels rather than beside its output:
a ``Concatenate`` would make the model a graph, which the layer chains do not read; the first convolution sees
them at every cell, and the Dense layers after the ``Flatten`` read them from there.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import keras
import numpy as np

from sensitivity.inputs.fields import field_cells
from sensitivity.settings import ConvTrunk


def field_layout(names: Sequence[str], trunk: ConvTrunk) -> np.ndarray:
    """``[n, cells x channels]``: the 0/1 matrix that puts input ``j`` where the trunk reads it, cell-major (C order
    over ``trunk.shape``), channel 0 the field's cell, channel ``1 + k`` the ``k``-th other input at every cell."""
    cells = field_cells(names, {trunk.field: list(trunk.shape)})[trunk.field]
    others = [j for j in range(len(names)) if j not in set(cells.tolist())]
    channels = 1 + len(others)
    layout = np.zeros((len(names), math.prod(trunk.shape) * channels))
    layout[cells, np.arange(len(cells)) * channels] = 1.0
    for k, j in enumerate(others, start=1):
        layout[j, k::channels] = 1.0
    return layout


def conv_trunk(h: Any, names: Sequence[str], trunk: ConvTrunk, activation: str) -> Any:
    """The trunk applied to the scaled inputs ``h`` (a Keras tensor ``[B, n]``): flat features ``[B, cells x
    filters[-1]]``."""
    layout = field_layout(names, trunk)
    channels = layout.shape[1] // math.prod(trunk.shape)
    place = keras.layers.Dense(layout.shape[1], use_bias=False, trainable=False, name="field_layout")
    h = place(h)
    place.set_weights([layout.astype(np.float32)])
    h = keras.layers.Reshape((*trunk.shape, channels), name="field_grid")(h)
    conv = keras.layers.Conv1D if len(trunk.shape) == 1 else keras.layers.Conv2D
    for k, filters in enumerate(trunk.filters):
        h = conv(filters, trunk.kernel_size, padding="same", activation=activation, name=f"conv_{k}")(h)
    return keras.layers.Flatten(name="field_features")(h)
