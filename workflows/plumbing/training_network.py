"""The network ``train`` fits: an MLP, or with ``training.architecture: conv`` a convolutional trunk over the field
of inputs that ``input_fields`` names (:mod:`sensitivity.training.conv`), ahead of the MLP's Dense layers."""
from __future__ import annotations

from typing import Any

from sensitivity.errors import ConfigError
from sensitivity.settings import ConvTrunk
from workflows.plumbing.schema import schema_of

#: ``training.architecture``, ``training.filters``, ``training.kernel_size`` (the library's defaults).
ConvConf = schema_of(ConvTrunk, "ConvConf", keys=("filters", "kernel_size"), extra=[("architecture", str, "mlp")])

ARCHITECTURES = ("mlp", "conv")


def conv_trunk(training: Any, input_fields: Any) -> ConvTrunk | None:
    """The trunk of ``training.architecture: conv`` over the one field of ``input_fields`` (``{name: shape}``);
    None for an MLP. A one-line :class:`ConfigError` names what is missing or unknown."""
    architecture = training.architecture
    if architecture not in ARCHITECTURES:
        raise ConfigError(f"`training.architecture` must be one of {ARCHITECTURES}, got {architecture!r}")
    if architecture == "mlp":
        return None
    fields = dict(input_fields or {})
    if len(fields) != 1:
        raise ConfigError(f"`training.architecture: conv` needs `input_fields` naming one field of inputs "
                          f"({{name: shape}}, e.g. {{logk: [32]}}), got {fields or None}")
    (field, shape), = fields.items()
    return ConvTrunk(field, tuple(shape), filters=tuple(training.filters), kernel_size=training.kernel_size)
