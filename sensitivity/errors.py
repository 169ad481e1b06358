"""The exception hierarchy of ``sensitivity``.

Every error a user can cause by a bad input, config or file derives from
:class:`SensitivityError`, so an application can catch the family, and carries a
one-line message that names the offending field and value.
"""
from __future__ import annotations

import errno
from pathlib import Path


class SensitivityError(Exception):
    """Base class of every error raised on purpose by this package."""


class ConfigError(SensitivityError, ValueError):
    """A configuration value is invalid: wrong type, out of range, inconsistent."""


class DataError(SensitivityError, ValueError):
    """An input file or array is malformed, incomplete or inconsistent."""


class ModelError(SensitivityError, ValueError):
    """A surrogate cannot be loaded, or its shapes disagree with its declared names."""


class VerificationFailed(SensitivityError):
    """A verification's verdict fails where the caller asked for it to hold (``verify.strict``)."""


def disk_error(path: str | Path, error: OSError) -> DataError:
    """A one-line error for a failed write (full disk, read-only directory, quota) that names the path."""
    reason = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
              errno.EROFS: "read-only file system", errno.EACCES: "permission denied"}.get(error.errno,
                                                                                         error.strerror or str(error))
    return DataError(f"cannot write {path}: {reason}; free space or choose another run directory "
                     "(finished parts are kept and a rerun resumes)")


def yaml_reason(error: Exception) -> str:
    """One line for a YAML document a safe loader refused: the problem and where (``line L, column C``).

    A Python tag (``!!python/object/apply:os.system``) is named as such: the safe loader builds no Python object
    and runs no code, it refuses the document.
    """
    mark = getattr(error, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = getattr(error, "problem", None) or next(
        (s.strip() for s in str(error).splitlines() if s.strip()), type(error).__name__)
    tag = problem.partition("tag:yaml.org,2002:")[2].rstrip("'\"")
    if tag.startswith("python/"):
        problem = f"a Python tag !!{tag}, refused (YAML is read safely: no Python object is made, no code run)"
    return problem + where
