"""The default study end to end at small sizes: every dataset it writes passes the CF 1.8 checker; a rerun
does no work, and a changed setting reruns its stage and those fed by it, no others."""
from __future__ import annotations

import pytest

from tests.helpers.cf import cf_report
from workflows import run
from workflows.plumbing.registry import CONF_DIR

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


def test_the_ensemble_study_carries_the_members_and_verifies_against_the_simulator(compose_config, tmp_path):
    """`sensitivity run experiment=seir_ensemble` on the shipped 5-member ensemble: every dataset is CF-clean, the
    indices carry each member's, and verify's whitened error at the best fit is what the simulator gives there
    (sensitivity.simulators.seir.simulate against the ensemble mean in float64, over the observed days, divided by
    the observations' sigma: computed here, not read from the run)."""
    import numpy as np
    import xarray as xr
    from hydra import initialize_config_dir

    from sensitivity import load_surrogate
    from sensitivity.simulators.seir import simulate
    from tests.helpers import ROOT

    cfg = compose_config("run", ["plots=false", "experiment=seir_ensemble", "study=seir_ensemble"])
    for stage in cfg.stages:
        stage.overrides += ["sobol.n=256"] if stage.workflow == "indices" else []
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        run.run(cfg)
    written = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.nc")}
    assert written == {"calibrate/calibration.nc", "calibrate/step_slice.nc", "indices/indices.nc", "verify/verify.nc"}
    for name in sorted(written):
        report = cf_report(tmp_path / name)
        assert report["high"] + report["medium"] + report["low"] == [], name
    with xr.open_dataset(tmp_path / "indices" / "indices.nc") as indices:
        members = indices["sobol_ST_member"].load()
    assert members.sizes["member"] == 5 and float(members.std("member").max()) > 0
    with xr.open_dataset(tmp_path / "verify" / "verify.nc") as verify, \
            xr.open_dataset(ROOT / "data" / "seir" / "observations.nc") as observations:
        point, reported = verify["calibration_point"].values, float(verify["calibration_whitened_error_rms"][0])
        sigma, observed = observations["sigma"].values, np.isfinite(observations["observed"].values)
    ensemble = load_surrogate(ROOT / "data" / "seir" / "surrogate.ensemble", dtype="float64")
    whitened = ((ensemble(point) - simulate(point))[0] / sigma)[observed]
    np.testing.assert_allclose(reported, np.sqrt(np.mean(whitened**2)), rtol=1e-10)
