"""Measurements in fresh processes: a benchmark runs one child per measurement (its own peak RSS, no state
left by another), which prints its result as one JSON line.

A script defines ``CHILDREN = {role: function}`` and a hidden ``--child ROLE JSON-ARGS`` option;
:func:`serve` answers it in the child, :func:`run` starts one from the parent.
"""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Callable, Mapping, Sequence


def serve(child: Sequence[str] | None, roles: Mapping[str, Callable[..., Any]]) -> bool:
    """In a child (``child`` = ``[role, json args]``): run the role and print its JSON result; return
    whether this process was one."""
    if not child:
        return False
    role, payload = child
    print(json.dumps(roles[role](*json.loads(payload))))
    return True


def run(script: str, role: str, *args: Any, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Any:
    """``role(*args)`` of ``script`` in a fresh interpreter; its result (a failed child exits with its stderr)."""
    out = subprocess.run([sys.executable, script, "--child", role, json.dumps(args)], capture_output=True, text=True,
                         env=None if env is None else dict(env), cwd=cwd)
    if out.returncode != 0:
        raise SystemExit(f"{role} {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
