"""Structured-config schemas: a wrong type or an unknown key fails at composition, naming the key.

Each dataclass is registered in Hydra's ConfigStore; the workflow configs in ``conf/``
list the schema first in their defaults, so every YAML value is checked against it
before any work starts.

Adding a config key: a setting the library takes has its default in ONE place, the library's
frozen settings dataclass or the keyword argument of the library function that takes it
(e.g. :class:`~sensitivity.settings.EngineSettings`, :func:`~sensitivity.sweep.designs.make_grid`).
Add the field or keyword there (with its numpydoc), and the config node built by
:func:`schema_of` from that class or function picks it up with its default; pass it on in the
workflow's ``*_from`` helper. The settings of a module that imports TensorFlow live in :mod:`sensitivity.settings`,
so that composing a config never imports it; the library modules the schemas read take xarray and scipy through
:func:`sensitivity.runtime.lazy.lazy_import`, so that composing one imports neither (``tests/test_cli.py`` checks both). Only a key that the library does not take (an output path, a
switch of the workflow itself) is declared here or in the workflow module, with its default.
``conf/`` YAML never repeats a default: a config-group option is a preset that sets the values
it changes (commented examples of the other keys are welcome), and a primary config lists
only its defaults list, the values that differ for that workflow, and comments.
"""
from __future__ import annotations

import collections.abc
import copyreg
import dataclasses
import functools
import inspect
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Callable, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from sensitivity.sweep.designs import make_grid
from sensitivity.settings import EngineSettings
from sensitivity.simulators.executors import ExecutorSettings
from sensitivity.simulators.runner import RunnerSettings
from sensitivity.surrogates.simulator import SimulatorSettings
from workflows.plumbing.registry import modules

# dataclasses' sentinels pickle by name, as the singletons they are. The schemas below are built at run time
# (make_dataclass), so cloudpickle sends them by value with a multirun job's config (Hydra's submitit launcher) and,
# when the job's result comes back into this process, sets the returned class's attributes onto the original; its
# fields then held copies of `dataclasses.MISSING` that `is MISSING` no longer recognised (seen in the test suite
# after the cluster tutorial's submitit_local multirun, as `'_MISSING_TYPE' object is not callable`).
for _sentinel_type, _name in ((dataclasses._MISSING_TYPE, lambda obj: "MISSING"),
                              (dataclasses._HAS_DEFAULT_FACTORY_CLASS, lambda obj: "_HAS_DEFAULT_FACTORY"),
                              (dataclasses._KW_ONLY_TYPE, lambda obj: "KW_ONLY"),
                              (dataclasses._FIELD_BASE, lambda obj: obj.name)):
    copyreg.pickle(_sentinel_type, _name)

_PLAIN = (bool, int, float, str)


def _node_type(hint: Any, default: Any) -> Any:
    """The closest type OmegaConf supports for a library annotation: bool/int/float/str (a ``Literal``
    of strings: str; ``str | Path``: str), a list of them (any sequence), ``Optional`` of these when
    None is allowed, else ``Any`` (numpy arrays, mappings, other dataclasses, unions)."""
    node = _plain_type(hint)
    optional = default is None or type(None) in typing.get_args(hint)
    return Any if node is Any else Optional[node] if optional else node


def _plain_type(hint: Any) -> Any:
    if hint in _PLAIN:
        return hint
    origin, args = typing.get_origin(hint), [a for a in typing.get_args(hint) if a is not type(None)]
    if str in args:  # str | Path: a path is given as a string
        args = [a for a in args if a is str or not (isinstance(a, type) and issubclass(a, PurePath))]
    if origin is typing.Literal:
        return str if all(isinstance(a, str) for a in args) else Any
    if origin in (list, tuple, collections.abc.Sequence) and args and _plain_type(args[0]) in _PLAIN and (
            origin is not tuple or args[1:] in ([], [Ellipsis])):
        return List[_plain_type(args[0])]
    if len(args) == 1 and origin in (typing.Union, types.UnionType):
        return _plain_type(args[0])
    return Any


def _node_default(default: Any) -> Any:
    """A default as an OmegaConf value: tuples become lists (a mutable default needs a factory); an empty mapping
    becomes null (the library reads None as empty), as OmegaConf cannot merge a dict override into an empty dict
    node of a structured config."""
    if isinstance(default, (tuple, list)):
        value = list(default)
        return field(default_factory=lambda: list(value))
    if isinstance(default, collections.abc.Mapping) and not default:
        return None
    return default


def schema_of(settings: Any, name: str, *, keys: tuple[str, ...] | None = None,
              rename: Dict[str, str] | None = None, extra: List[tuple] | None = None) -> type:
    """A structured-config dataclass with the fields and defaults of a library settings class.

    Parameters
    ----------
    settings
        A (frozen) dataclass of the library, an instance of one (its values are the defaults: a nested default
        such as :attr:`WorthSettings.design <sensitivity.analyses.worth.plan.WorthSettings>`), or a library
        function whose keyword arguments with defaults are its settings.
    name
        The class name of the schema (shown in Hydra's error messages).
    keys
        The settings to expose, in this order (default: every field / keyword with a default).
    rename
        ``{config key: library name}`` for keys spelled differently in the config.
    extra
        More fields ``(name, type, default)`` that the library does not take (workflow-only keys).
    """
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        found = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.init}
        settings = type(settings)
    elif dataclasses.is_dataclass(settings):
        found = {f.name: f.default if f.default is not dataclasses.MISSING else
                 f.default_factory() if f.default_factory is not dataclasses.MISSING else "???"
                 for f in dataclasses.fields(settings) if f.init}
    else:
        found = {p.name: p.default for p in inspect.signature(settings).parameters.values()
                 if p.default is not inspect.Parameter.empty}
    rename = rename or {}
    chosen = keys if keys is not None else tuple(found)
    hints = _type_hints(settings, {rename.get(key, key) for key in chosen})
    fields = []
    for key in chosen:
        default = found[rename.get(key, key)]
        fields.append((key, _node_type(hints.get(rename.get(key, key), Any), default), _node_default(default)))
    fields += [(key, kind, _node_default(default)) for key, kind, default in extra or []]
    return dataclasses.make_dataclass(name, [(k, t, d if isinstance(d, dataclasses.Field) else field(default=d))
                                             for k, t, d in fields])


def _type_hints(settings: type | Callable, names: set[str]) -> Dict[str, Any]:
    """The evaluated annotations of the fields or keyword arguments ``names`` of ``settings``, as
    :func:`typing.get_type_hints` evaluates them, but only these: another annotation (a return type
    ``xr.Dataset``) would import its module (:mod:`sensitivity.runtime.lazy`) only to be discarded."""
    hints: Dict[str, Any] = {}
    if isinstance(settings, type):
        for base in reversed(settings.__mro__):  # as get_type_hints: a subclass's annotation wins
            wanted = {k: v for k, v in base.__dict__.get("__annotations__", {}).items() if k in names}
            if wanted:  # module names first, then the class's own (get_type_hints' order)
                hints.update(typing.get_type_hints(types.SimpleNamespace(__annotations__=wanted),
                                                   globalns=dict(vars(base)),
                                                   localns=vars(sys.modules[base.__module__])))
        return hints
    function = inspect.unwrap(settings)
    wanted = {k: v for k, v in getattr(function, "__annotations__", {}).items() if k in names}
    return typing.get_type_hints(types.SimpleNamespace(__annotations__=wanted), globalns=function.__globals__)


def kinds_schema(name: str, kinds: Dict[str, type]) -> type:
    """A config node that picks one of several library settings classes by ``kind`` (the first is the default).

    Its keys are ``kind`` and the union of the classes' settings, each null by default: null keeps
    the chosen kind's own default, and a key the chosen kind does not take is ignored.
    """
    fields: Dict[str, Any] = {}
    for settings in kinds.values():
        for item in dataclasses.fields(schema_of(settings, name)):
            fields.setdefault(item.name, Any if item.type is Any else Optional[item.type])
    return dataclasses.make_dataclass(name, [("kind", str, field(default=next(iter(kinds))))]
                                      + [(key, kind, field(default=None)) for key, kind in fields.items()])


def settings_from(settings: type, node: Any) -> Dict[str, Any]:
    """The keyword arguments of ``settings`` that a :func:`kinds_schema` node sets (not null)."""
    return {item.name: node[item.name] for item in dataclasses.fields(settings)
            if item.init and node[item.name] is not None}


@dataclass
class ParameterConf:
    name: str
    units: str
    low: Optional[float] = None    # derived from `distribution` when omitted (sensitivity.inputs.space.Parameter)
    high: Optional[float] = None
    nominal: Optional[float] = None
    long_name: str = ""
    scale: str = "linear"
    distribution: Optional[Dict[str, Any]] = None


@dataclass
class SpaceConf:
    parameters: List[ParameterConf] = field(default_factory=list)
    correlation: Any = None  # a matrix (checked by ParameterSpace: symmetric, unit diagonal, positive definite)


@dataclass
class ModelConf:
    source: str = "???"
    kwargs: Dict[str, Any] = field(default_factory=dict)
    # typed Any: OmegaConf cannot merge a dict override into a None Optional[Dict] node
    output: Any = None
    scaling: Any = None
    trusted: bool = False  # required to load a TF SavedModel directory (it runs its graph on load)
    # other files or folders the model reads (by a name of its own): their content enters every fingerprint
    depends_on: List[str] = field(default_factory=list)


GridConf = schema_of(make_grid, "GridConf", keys=("levels", "seed", "scramble", "steps", "path", "through"), extra=[
    ("kind", str, "sobol"), ("n", int, 1024),  # conf/grid/ holds a preset of each kind
    ("shard", int, 0), ("num_shards", int, 1)])  # this job's slice of the grid (a multirun's shards)


# `path` is left to the engine (dense whenever the model is a Keras MLP)
JacobianConf = schema_of(EngineSettings, "JacobianConf",
                         keys=("mode", "dtype", "jit_compile", "chunk_size", "memory_budget_mb"))


ExecutorConf = schema_of(ExecutorSettings, "ExecutorConf")  # where the simulator's batches run
RunnerConf = schema_of(RunnerSettings, "RunnerConf")  # batches of points and local worker processes
_TimeoutConf = schema_of(SimulatorSettings, "SimulatorTimeoutConf")


@dataclass
class SimulatorConf(_TimeoutConf, RunnerConf):
    """The simulator of every workflow that runs one (train, verify, multifidelity, simulate) and how it runs
    (:mod:`workflows.plumbing.simulation`)."""

    # a program (the keys of sensitivity.simulators.program.ProgramSettings): the simulator of every workflow whose
    # own `*.simulator` is null; typed Any: its keys are checked by the library, in one line
    program: Any = None
    executor: ExecutorConf = field(default_factory=ExecutorConf)


@dataclass
class ObservationsConf:
    """The observations a calibration problem is fitted to (calibrate, posterior)."""

    path: str = "???"


@dataclass
class PriorConf:
    """A Gaussian prior of the calibration problem (calibrate, posterior): off while `std` and `cov` are null and
    `from_space` is false."""

    # typed Any: OmegaConf cannot merge a dict override into a None or an empty typed Dict node
    mean: Any = None  # name -> value
    std: Any = None  # name -> standard deviation
    # typed Any: OmegaConf's merge refuses an int in a List[List[float]] ("Value 0 (int) is incompatible with type
    # hint 'float'"); the numbers are checked where the prior is built (workflows.build.prior_from)
    cov: Any = None  # [[...], ...] an n x n matrix in the space's parameter order
    from_space: bool = False  # the space's distributions: each marginal's mean and std, the space's correlation


@dataclass
class SurrogateStudyConf:
    """The keys every workflow on a surrogate composes: the model, its parameter space, a grid (read by the sweep
    and export; present in the others so that experiments which set one compose) and the engine's options."""

    model: ModelConf = field(default_factory=ModelConf)
    space: SpaceConf = field(default_factory=SpaceConf)
    grid: GridConf = field(default_factory=GridConf)
    jacobian: JacobianConf = field(default_factory=JacobianConf)
    space_file: Optional[str] = None  # a SALib problem file (JSON/YAML) used as the space instead of `space`
    allow_unverified: bool = False  # use an input result that has no checksum record (workflows/plumbing/chain.py)
    allow_other_sources: bool = False  # use an input result computed from another surrogate, observations or space
    replace_other_settings: bool = False  # replace a result of other settings in the run directory (sensitivity run)
    recompute: bool = False  # recompute even when the run directory holds this computation's complete result


@dataclass
class SweepConf(SurrogateStudyConf):
    output_dir: str = "???"
    progress: bool = True
    points_per_part: Optional[int] = None
    store_members: bool = False  # an ensemble's sweep also stores each member's Jacobians (K x the Jacobians)
    plots: bool = True


def check_known_keys(cfg: Any, schema: type, workflow: str) -> None:
    """Refuse keys the schema does not have: Hydra lets ``+grid.seeed=3`` add one past the schema.

    Every value under a schema field typed ``Any``/``Dict`` (model outputs, kwargs, distributions) is free.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    from sensitivity.errors import ConfigError

    try:
        # as plain containers: a node that carries its schema type is merged without checking its keys
        OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.create(OmegaConf.to_container(cfg)))
    except ConfigKeyError as err:
        key = str(getattr(err, "full_key", "") or err).splitlines()[0]
        raise ConfigError(renamed(key) or f"unknown key `{key}`: the {workflow} config has no such setting (a `+` "
                          f"override adds keys past the schema){_suggestion(schema, key)}") from None


#: Config keys renamed (one name per concept, docs/glossary.md): ``{old key: new key}``. An old key, on the command
#: line or in a YAML file, is refused in one line naming the new one (:func:`renamed`).
RENAMED_KEYS = {"intervals.conf_level": "intervals.level", "multifidelity.conf_level": "multifidelity.level",
                "importance.confidence": "importance.level", "subset.confidence": "subset.level",
                "monte_carlo.confidence": "monte_carlo.level"}


def renamed(key: str) -> str:
    """``"`intervals.conf_level` is now `intervals.level`"`` for a renamed config key (:data:`RENAMED_KEYS`), else
    ``""``."""
    key = key.lstrip("+~")
    return f"`{key}` is now `{RENAMED_KEYS[key]}`" if key in RENAMED_KEYS else ""


def _suggestion(schema: type, key: str) -> str:
    """``"; did you mean `grid.seed`?"`` for an unknown ``key`` close to one the schema has; for a key of a free
    mapping (``model.kwargs``, ``training.simulator_kwargs``: Hydra merges ``key={a: 1}`` into the config's
    mapping, which takes no key it does not hold) how to give it; else ``""``."""
    import difflib

    from omegaconf import OmegaConf

    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(OmegaConf.structured(schema), parent_key) if parent_key else OmegaConf.structured(schema)
    if parent_key and OmegaConf.is_dict(parent) and OmegaConf.get_type(parent) is dict:
        return (f"; `{parent_key}` is a mapping of your own keys, given one by one: `+{key}=...` (a mapping "
                "given whole is merged into the config's own)")
    known = list(parent.keys()) if parent is not None and OmegaConf.is_dict(parent) else []
    close = difflib.get_close_matches(leaf, known, n=1)
    return f"; did you mean `{parent_key + '.' if parent_key else ''}{close[0]}`?" if close else ""


def suggest_for(key: str) -> str:
    """:func:`_suggestion` for ``key`` against every workflow's schema (the first that has a close match)."""
    for schema in _SCHEMAS.values():
        hint = _suggestion(schema, key)
        if hint:
            return hint
    return ""


#: Workflow name -> its own schema (``SCHEMA``), filled by :func:`register`.
_SCHEMAS: Dict[str, type] = {}


def own_keys(schema: type) -> list[str]:
    """The top-level keys of a schema."""
    return [f.name for f in dataclasses.fields(schema)]


def workflow_keys(workflow: str) -> set[str]:
    """The top-level keys of ``workflow``'s own schema (not the other studies' keys its config also holds)."""
    register()
    return set(own_keys(_SCHEMAS[workflow]))


def study_schema(name: str, schemas: Dict[str, type]) -> type:
    """The schema workflow ``name`` composes with: its own keys, and every top-level key of the other
    workflows' schemas, typed ``Any`` and null.

    So one experiment file can hold a whole study (``n_chains`` for the posterior, ``sobol.n`` for the
    indices, ``grid.n`` for the sweep): each workflow composes it, takes its own keys, and leaves the
    others to the workflows they belong to (:func:`own_config` checks them against those and drops them).
    A key that no workflow has is still refused when the config is composed.
    """
    own = set(own_keys(schemas[name]))
    foreign = sorted({key for other, schema in schemas.items() if other != name for key in own_keys(schema)} - own)
    return dataclasses.make_dataclass(schemas[name].__name__, [_foreign_field(key, schemas) for key in foreign],
                                      bases=(schemas[name],))


def _foreign_field(key: str, schemas: Dict[str, type]) -> tuple[str, Any, Any]:
    """Another workflow's top-level key: a section (a dataclass) keeps its owner's schema and defaults, so a
    dotted override (``starts.n=8``, ``sobol.n=512``) applies to every workflow of a study, and is checked; a
    plain value is ``Any`` and null."""
    for schema in schemas.values():
        found = {f.name: f for f in dataclasses.fields(schema)}.get(key)
        if found is None:
            continue
        hint = _hints_of(schema).get(key)
        if dataclasses.is_dataclass(hint) and found.default_factory is not dataclasses.MISSING:
            return key, hint, field(default_factory=found.default_factory)
    return key, Any, field(default=None)


@functools.lru_cache(maxsize=None)
def _hints_of(schema: type) -> Dict[str, Any]:
    """:func:`typing.get_type_hints` of a workflow's schema, once (:func:`study_schema` reads it for every key)."""
    return typing.get_type_hints(schema)


def own_config(cfg: Any, workflow: str) -> Any:
    """``cfg`` with only the keys of ``workflow``'s schema, after checking every key against its workflow.

    A key of another workflow's schema that is set (not null) is checked against that schema (types and
    unknown sub-keys, with a suggestion), so a typo in an experiment file is refused by every workflow, not
    only by the one it is meant for; a key of this workflow's schema is checked by :func:`check_known_keys`.

    Raises
    ------
    ConfigError
        A key, or a sub-key, that no workflow has, or a value of the wrong type, in one line.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, ValidationError

    from sensitivity.errors import ConfigError

    schema = _SCHEMAS[workflow]
    own = set(own_keys(schema))
    for key in [k for k in cfg if k not in own and cfg[k] is not None]:
        owners = [(name, s) for name, s in _SCHEMAS.items() if key in own_keys(s)]
        if not owners:
            raise ConfigError(f"unknown key `{key}`: no workflow has such a setting (a `+` override adds keys past "
                              f"the schemas){suggest_for(key)}")
        value = OmegaConf.create({key: OmegaConf.to_container(cfg[key])}) if OmegaConf.is_config(cfg[key]) else \
            OmegaConf.create({key: cfg[key]})
        try:
            OmegaConf.merge(OmegaConf.structured(_key_schema(owners[0][1], key)), value)
        except ConfigKeyError as err:
            full = str(getattr(err, "full_key", "") or err).splitlines()[0]
            raise ConfigError(renamed(full) or f"unknown key `{full}`: the {owners[0][0]} config has no such "
                              f"setting{_suggestion(owners[0][1], full)}") from None
        except ValidationError as err:
            raise ConfigError(f"`{key}` (a setting of {owners[0][0]}): {str(err).splitlines()[0]}") from None
    check_known_keys(OmegaConf.masked_copy(cfg, [k for k in cfg if k in own]), schema, workflow)
    return OmegaConf.masked_copy(cfg, [k for k in cfg if k in own])


@functools.lru_cache(maxsize=None)
def _key_schema(schema: type, key: str) -> type:
    """``schema`` with only its field ``key`` (its type and default): a key of another workflow is checked against
    the section it owns, without structuring that workflow's whole schema (:func:`own_config`, once per key)."""
    found = {f.name: f for f in dataclasses.fields(schema)}[key]
    default = field(default_factory=found.default_factory) if found.default_factory is not dataclasses.MISSING \
        else field(default=found.default)
    return dataclasses.make_dataclass(schema.__name__, [(key, _type_hints(schema, {key})[key], default)])


#: The workflows whose study schema :func:`register` has put in Hydra's ConfigStore.
_STORED: set[str] = set()


def register(*workflows: str) -> None:
    """Register the study schema (:func:`study_schema`) of each of ``workflows`` (default: every workflow) as
    ``<workflow>_schema`` (idempotent).

    A workflow module declares its schema as a module attribute ``SCHEMA`` (a dataclass built
    from the shared parts above); its primary config lists ``<workflow>_schema`` first. Every workflow's schema
    is read (a study schema holds the other workflows' keys), but the command line stores only the one it
    composes: Hydra deep-copies the whole ConfigStore for every config it loads (once per config group under
    ``--help``), and each stored study schema holds every workflow's sections.
    """
    if not _SCHEMAS:
        _SCHEMAS.update({name: module.SCHEMA for name, module in modules() if getattr(module, "SCHEMA", None)})
    store = ConfigStore.instance()
    for name in workflows or tuple(_SCHEMAS):
        if name in _SCHEMAS and name not in _STORED:
            store.store(name=f"{name}_schema", node=study_schema(name, _SCHEMAS))
            _STORED.add(name)
