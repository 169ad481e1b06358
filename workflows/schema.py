"""Structured-config schemas: a wrong type or an unknown key fails at composition, naming the key.

Each dataclass is registered in Hydra's ConfigStore; the workflow configs in ``conf/``
list the schema first in their defaults, so every YAML value is checked against it
before any work starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from workflows.registry import modules


@dataclass
class ParameterConf:
    name: str
    units: str
    low: Optional[float] = None    # derived from `distribution` when omitted (sensitivity.space.Parameter)
    high: Optional[float] = None
    nominal: Optional[float] = None
    long_name: str = ""
    scale: str = "linear"
    distribution: Optional[Dict[str, Any]] = None


@dataclass
class SpaceConf:
    parameters: List[ParameterConf] = field(default_factory=list)
    correlation: Optional[List[List[float]]] = None


@dataclass
class ModelConf:
    source: str = "???"
    kwargs: Dict[str, Any] = field(default_factory=dict)
    # typed Any: OmegaConf cannot merge a dict override into a None Optional[Dict] node
    output: Any = None
    scaling: Any = None
    trusted: bool = False  # required to load a TF SavedModel directory (it runs its graph on load)


@dataclass
class GridConf:
    kind: str = "sobol"
    n: int = 1024
    levels: Optional[List[int]] = None
    seed: int = 0
    scramble: bool = True
    steps: int = 5
    path: Optional[str] = None
    shard: int = 0
    num_shards: int = 1
    through: str = "bounds"   # or "distribution": random designs through the marginals' quantiles (in the bounds)


@dataclass
class JacobianConf:
    mode: str = "auto"
    dtype: str = "float32"
    jit_compile: bool = True
    chunk_size: Optional[int] = None
    memory_budget_mb: float = 1024.0


@dataclass
class SweepConf:
    model: ModelConf = field(default_factory=ModelConf)
    space: SpaceConf = field(default_factory=SpaceConf)
    grid: GridConf = field(default_factory=GridConf)
    jacobian: JacobianConf = field(default_factory=JacobianConf)
    output_dir: str = "???"
    space_file: Optional[str] = None  # a SALib problem file (JSON/YAML) used as the space instead of `space`
    progress: bool = True
    points_per_part: Optional[int] = None
    plots: bool = True


def check_known_keys(cfg: Any, schema: type, workflow: str) -> None:
    """Refuse keys the schema does not have: Hydra lets ``+grid.seeed=3`` add one past the schema.

    Every value under a schema field typed ``Any``/``Dict`` (model outputs, kwargs, distributions) is free.
    """
    import difflib

    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    from sensitivity.errors import ConfigError

    try:
        # as plain containers: a node that carries its schema type is merged without checking its keys
        OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.create(OmegaConf.to_container(cfg)))
    except ConfigKeyError as err:
        key = str(getattr(err, "full_key", "") or err).splitlines()[0]
        parent = OmegaConf.select(OmegaConf.structured(schema), key.rpartition(".")[0]) if "." in key else None
        known = list(parent.keys()) if parent is not None and OmegaConf.is_dict(parent) else []
        close = difflib.get_close_matches(key.rpartition(".")[2], known, n=1)
        hint = f"; did you mean `{key.rpartition('.')[0]}.{close[0]}`?" if close else ""
        raise ConfigError(f"unknown key `{key}`: the {workflow} config has no such setting (a `+` override adds "
                          f"keys past the schema){hint}") from None


def register() -> None:
    """Register every workflow's schema as ``<workflow>_schema`` (idempotent).

    A workflow module declares its schema as a module attribute ``SCHEMA`` (a dataclass built
    from the shared parts above); its primary config lists ``<workflow>_schema`` first.
    """
    store = ConfigStore.instance()
    for name, module in modules():
        if getattr(module, "SCHEMA", None) is not None:
            store.store(name=f"{name}_schema", node=module.SCHEMA)
