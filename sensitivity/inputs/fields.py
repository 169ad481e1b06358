"""Fields of inputs: parameters named ``<field>_<cell>`` (``logk_00`` .. ``logk_44``) laid out on a grid.

A conductivity, rainfall or initial-condition field enters a model as many scalar inputs. Declared by name and
shape (``input_fields: {logk: [5, 5]}``), its parameters are those named ``<field>_*``, in the space's order,
filling the grid in C order (row by row); :mod:`sensitivity.plots.fields` maps their indices.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError


def field_cells(names: Sequence[str], fields: Mapping[str, Sequence[int]]) -> dict[str, np.ndarray]:
    """``{field: [cells] positions in names}``: the parameters ``<field>_*`` of each field, checked against its
    shape (one or two positive sizes whose product is their number); a one-line :class:`ConfigError` names the
    field otherwise."""
    cells = {}
    for field, shape in fields.items():
        shape = list(shape) if isinstance(shape, (list, tuple)) else shape
        if (not isinstance(shape, list) or not 1 <= len(shape) <= 2
                or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
            raise ConfigError(f"input_fields.{field}: the shape must be one or two positive integers, got {shape!r}")
        found = np.array([i for i, name in enumerate(names) if str(name).startswith(f"{field}_")], dtype=int)
        if found.size != math.prod(shape):
            raise ConfigError(f"input_fields.{field}: shape {shape} needs {math.prod(shape)} parameters named "
                              f"{field}_*, the space has {found.size}")
        cells[field] = found
    return cells
