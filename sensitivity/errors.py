"""The exception hierarchy of ``sensitivity``.

Every error a user can cause by a bad input, config or file derives from
:class:`SensitivityError`, so an application can catch the family, and carries a
one-line message that names the offending field and value.
"""
from __future__ import annotations


class SensitivityError(Exception):
    """Base class of every error raised on purpose by this package."""


class ConfigError(SensitivityError, ValueError):
    """A configuration value is invalid: wrong type, out of range, inconsistent."""


class DataError(SensitivityError, ValueError):
    """An input file or array is malformed, incomplete or inconsistent."""


class ModelError(SensitivityError, ValueError):
    """A surrogate cannot be loaded, or its shapes disagree with its declared names."""
