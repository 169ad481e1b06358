"""The configs state no default: a default lives in the library's settings (one place), and
``sensitivity <workflow> --cfg job`` shows every key with its value, so a YAML comment that restates one
(``#   points: 21``) could only drift from it."""
from __future__ import annotations

import dataclasses
import re

from workflows.plumbing.registry import CONF_DIR
from workflows.plumbing.schema import _SCHEMAS, register

#: A comment line that reads as a YAML mapping entry: ``# key: value`` (a commented-out setting).
SETTING = re.compile(r"^\s*#\s*([A-Za-z_][A-Za-z0-9_]*):(\s|$)")


def _keys(schema: type) -> set[str]:
    """Every field name of a schema, nested sections included."""
    names = set()
    for item in dataclasses.fields(schema):
        names.add(item.name)
        default = item.default_factory() if item.default_factory is not dataclasses.MISSING else item.default
        if dataclasses.is_dataclass(default):
            names |= _keys(type(default))
    return names


def test_no_config_comment_restates_a_setting():
    register()
    known = set().union(*(_keys(schema) for schema in _SCHEMAS.values()))
    stated = [f"{path.relative_to(CONF_DIR)}:{number}: {line.strip()}"
              for path in sorted(CONF_DIR.rglob("*.yaml"))
              for number, line in enumerate(path.read_text().splitlines(), start=1)
              if (match := SETTING.match(line)) and match.group(1) in known]
    assert stated == [], "\n".join(stated)


def test_a_schema_sent_to_a_multirun_job_and_back_keeps_its_defaults():
    """Hydra's submitit launcher sends a job's config, whose structured type is a schema built at run time, by value
    (cloudpickle); the result's copy of the class coming back is set onto the original. Its fields must keep
    ``dataclasses.MISSING`` itself (identity is how dataclasses and the code tell "no default factory"), and the
    class must still construct its defaults. Oracle: a dataclass defined in this file, never pickled."""
    import cloudpickle

    from workflows.plumbing.schema import study_schema

    register()
    schema = study_schema("sweep", _SCHEMAS)
    assert schema.__module__ == "types"  # built at run time: cloudpickle sends it by value
    assert cloudpickle.loads(cloudpickle.dumps(schema)) is schema  # and reconciles the copy onto the original
    for item in dataclasses.fields(schema):
        assert item.default is dataclasses.MISSING or item.default_factory is dataclasses.MISSING, item.name
    assert dataclasses.asdict(schema())["grid"] == dataclasses.asdict(_SCHEMAS["sweep"]().grid)
