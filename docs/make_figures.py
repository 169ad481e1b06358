"""Make the README's figure from a real run: docs/figures/tour.png.

Usage (from the repository root, about a minute on 2 cores)::

    python docs/make_figures.py [RUN_DIR]

It runs the tour's command, ``sensitivity calibrate experiment=seir observations.path=data/seir/observations.nc``,
with its run directory in RUN_DIR (default: a temporary folder), and draws the fit of ``calibration.nc``: the
observations with their standard deviations, the best fit, its 95 % delta-method band, and the noise-free
truth stored in the observation file.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURE = ROOT / "docs" / "figures" / "tour.png"
COMMAND = ["calibrate", "experiment=seir", "observations.path=data/seir/observations.nc", "progress=false"]


def calibrate(run_dir: Path) -> Path:
    """Run the tour's calibration into ``run_dir``; return its ``calibration.nc``."""
    subprocess.run([sys.executable, "-m", "workflows", *COMMAND, f"hydra.run.dir={run_dir}"], cwd=ROOT, check=True)
    return run_dir / "calibration.nc"


def draw(calibration: Path, observations: Path, target: Path) -> Path:
    """The fit of ``calibration`` against ``observations`` (with its noise-free truth) as a small PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import xarray as xr

    with xr.open_dataset(calibration) as fit, xr.open_dataset(observations) as obs:
        best = fit.isel(start=int(fit.best_start))
        day = fit.day.values
        units = obs.observed.attrs.get("units", "")
        fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
        low, high = best.prediction_band.values
        ax.fill_between(day, low, high, color="tab:blue", alpha=0.25, lw=0, label="95 % band of the fit")
        ax.plot(day, best.model_output.values, color="tab:blue", lw=1.6, label="best fit (65 starts)")
        ax.plot(obs.day.values, obs.true_value.values, color="k", lw=0.9, ls="--", label="truth (noise-free)")
        ax.errorbar(obs.day.values, obs.observed.values, yerr=obs.sigma.values, fmt="o", ms=2.5, lw=0.6,
                    color="tab:red", label="observed (days 1-70) +- sigma")
        inside = int((fit.true_in_interval.values == 1).sum())
        ax.set(xlabel=f"day [{fit.day.attrs.get('units', '')}]",
               ylabel=f"new infections [{units}]",
               title=f"SEIR surrogate fitted to noisy observations: {inside} of {fit.sizes['parameter']} "
                     f"true parameters inside their 95 % intervals")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8, frameon=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=90)
        plt.close(fig)
    return target


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run = Path(sys.argv[1]).resolve()
        print(draw(calibrate(run), ROOT / "data" / "seir" / "observations.nc", FIGURE))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            print(draw(calibrate(Path(tmp) / "calibrate"), ROOT / "data" / "seir" / "observations.nc", FIGURE))
