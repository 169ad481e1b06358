"""The library's registry of studies: each study declares every part once, or says it has none."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from sensitivity.errors import ConfigError
from sensitivity.studies import BY_NAME, NONE, STUDIES, ResultKind, Study, resolve


@pytest.mark.parametrize("part", ["verbs", "settings", "kinds"])
@pytest.mark.parametrize("missing", [None, (), ""])
def test_a_study_registered_without_one_of_its_parts_is_refused(part, missing):
    parts = dict(name="mine", verbs=("pkg.mod.fn",), settings=("pkg.mod.Settings",),
                 kinds=(ResultKind("mine", ("y",), NONE, "pkg.mod.summary"),))
    Study(**parts)  # all given: registered
    Study(**{**parts, part: NONE}) if part != "verbs" else None  # explicitly none: registered
    with pytest.raises(ConfigError, match=f"study 'mine': no `{part}`; declare it, or `NONE`"):
        Study(**{**parts, part: missing})


def test_a_result_kind_without_its_summary_is_refused():
    with pytest.raises(ConfigError, match="result kind 'mine': no `summary`"):
        ResultKind("mine", ("y",), NONE, "")


def test_every_declared_name_resolves_and_every_summary_is_a_function():
    for study in STUDIES:
        for name, path in study.face().items():
            assert resolve(path) is not None, (study.name, name)
        for kind in study.kinds:
            assert callable(resolve(kind.summary)) and (kind.test is NONE or callable(resolve(kind.test)))


def test_the_propagation_kind_is_told_by_the_dims_its_dataset_writes():
    from sensitivity.analyses.propagation.dataset import METHOD_DIM

    assert BY_NAME["propagate"].kinds[0].dims == (METHOD_DIM,)


def test_a_kind_is_told_by_its_variables_and_dims():
    kind = ResultKind("posterior", ("draws",), ("chain",), "sensitivity.analyses.posterior.summary.summary")
    chains = xr.Dataset({"draws": (("chain", "draw"), np.zeros((2, 3)))})
    assert kind.matches(chains)
    assert not kind.matches(chains.rename({"chain": "walker"})) and not kind.matches(chains.rename({"draws": "x"}))
