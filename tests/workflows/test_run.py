"""The default study end to end at small sizes: every dataset it writes passes the CF 1.8 checker; a rerun
does no work, and a changed setting reruns its stage and those fed by it, no others."""
from __future__ import annotations

import pytest

from tests.helpers.cf import cf_report
from workflows import run
from workflows.registry import CONF_DIR

pytestmark = pytest.mark.slow

#: What the default study writes (its stages: conf/experiment/seir.yaml).
DATASETS = {"sweep/sweep.nc", "calibrate/calibration.nc", "calibrate/step_map.nc", "calibrate/step_slice.nc",
            "posterior/posterior.nc", "propagate/propagation.nc", "propagate/local_propagation.nc",
            "indices/indices.nc"}

SMALL = {"indices": ["sobol.n=256"], "propagate": ["propagation.n_samples=1024"],
         "posterior": ["n_chains=4", "nuts.num_warmup=100", "nuts.num_draws=100", "throw=false"]}


def test_every_dataset_of_the_default_study_is_cf_clean(compose_config, tmp_path):
    from hydra import initialize_config_dir

    cfg = compose_config("run", ["plots=false", "study=seir"])
    for stage in cfg.stages:  # the same chain on small designs, without XLA (compiling costs more than it saves)
        stage.overrides = [o for o in stage.overrides if not o.startswith("sobol.n=")] + SMALL.get(stage.workflow, [])
        stage.overrides += ["debug=default", "jacobian.jit_compile=false"]
    with initialize_config_dir(str(CONF_DIR), version_base=None):  # run() composes each stage's config
        run.run(cfg)
    written = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.nc")}
    assert written == DATASETS
    for name in sorted(written):
        report = cf_report(tmp_path / name)
        assert report["high"] == [], name
        assert report["medium"] + report["low"] == [], name
