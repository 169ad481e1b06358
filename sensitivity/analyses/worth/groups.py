"""Named groups of parameters, observations or candidates, resolved to index arrays.

A group specification maps a group name to the members' names or positions (or one name or position); ``None``
gives one group per member, named as the member. Every data-worth verb takes its groups through
:func:`resolve_groups`, so a misspelt name fails the same way everywhere.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError

#: A group specification: group name -> member names or positions (one or several), or ``None``.
GroupSpec = Mapping[str, Sequence[str | int] | str | int] | None


def resolve_groups(groups: GroupSpec, names: tuple[str, ...], field: str) -> tuple[tuple[str, ...],
                                                                                   list[np.ndarray]]:
    """Group names and each group's member positions (sorted, unique).

    Parameters
    ----------
    groups
        Group name -> members (names from ``names`` or integer positions), or ``None`` for one group per member.
    names
        The members' names.
    field
        The argument's name, for the error messages.

    Raises
    ------
    ConfigError
        An unknown member, a position out of range, or an empty group.
    """
    if groups is None:
        return names, [np.array([i]) for i in range(len(names))]
    if not isinstance(groups, Mapping):
        raise ConfigError(f"{field} must map group names to members, got {type(groups).__name__}")
    lookup = {name: i for i, name in enumerate(names)}
    group_names, members = [], []
    for group, spec in groups.items():
        items = [spec] if isinstance(spec, (str, int, np.integer)) else list(spec)
        if not items:
            raise ConfigError(f"{field} group {group!r} is empty")
        index = []
        for item in items:
            if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                if not 0 <= item < len(names):
                    raise ConfigError(f"{field} group {group!r}: position {item} is out of range 0..{len(names) - 1}")
                index.append(int(item))
            elif str(item) in lookup:
                index.append(lookup[str(item)])
            else:
                raise ConfigError(f"{field} group {group!r}: unknown name {item!r}")
        group_names.append(str(group))
        members.append(np.unique(index))
    return tuple(group_names), members
