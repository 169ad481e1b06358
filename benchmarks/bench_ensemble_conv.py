"""Jacobians/s of a conv ensemble as ``train`` builds it: the member path against the autodiff path and K engines.

The ensemble is trained by :func:`sensitivity.training.train_surrogate` (what ``sensitivity train
training.architecture=conv`` runs) on a 32-cell log-conductivity field ``logk_0 .. logk_31``
(``input_fields={logk: [32]}``) with 4 wells, with the workflow's defaults (Conv1D trunk of 16, 16 filters, kernel 3,
``padding="same"``; Dense 128, 128, gelu), --members members, for a few epochs (the time of a Jacobian does not depend
on how well the weights fit): InputScaling, the field layout, Reshape, Conv1D x2, Flatten, Dense x3, OutputScaling.
The "simulator" is a smoothed harmonic mean of the field seen from each well (any smooth function would do).
Contenders, interleaved round by round (best of --rounds passes over --points points, float32, reverse mode):
  member path       ``compile_ensemble(ensemble)``: every member's reverse conv chain in turn, one call per chunk
  autodiff path     ``compile_ensemble(ensemble, path="autodiff")``: every member's autodiff, one call per chunk
  K engines         ``compile_jacobian(member_k)`` for k = 1..K, one after the other (K x the single-member path)
  one member        ``compile_jacobian(member_0)``: the reverse path of one network
  ensemble mean     ``compile_jacobian(ensemble)``: the mean's Jacobian on the member chain (what an analysis of
                    the ensemble's prediction compiles)
Every contender's members' mean Jacobian is checked against the member path's before any timing (the ensemble's
calibrated spread recentres its members about that mean, the members' own engines do not).

Usage: python benchmarks/bench_ensemble_conv.py [--members 2] [--points 4096] [--rounds 3] [--epochs 3]
"""
from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()

import numpy as np  # noqa: E402

CELLS, WELLS = 32, (4, 12, 20, 28)


def simulate(x: np.ndarray) -> np.ndarray:
    """Head-like responses ``[N, 4]`` at the wells: the harmonic mean of the conductivities weighted by distance."""
    cells = np.arange(CELLS)
    weights = np.array([np.exp(-0.5 * ((cells - w) / 4.0) ** 2) for w in WELLS])  # [4, 32]
    weights /= weights.sum(axis=1, keepdims=True)
    return 1.0 / (np.exp(-x) @ weights.T)


def trained_ensemble(directory: Path, members: int, epochs: int):
    """The conv ensemble ``train`` would write for the 32-cell field, loaded (float32)."""
    import sensitivity
    from sensitivity.inputs.space import ParameterSpace
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.settings import ConvTrunk, TrainingPlan, TrainSettings
    from sensitivity.training import train_surrogate

    space = ParameterSpace.from_records([{"name": f"logk_{i}", "units": "1", "low": -2.0, "high": 2.0}
                                         for i in range(CELLS)])
    x = np.random.default_rng(0).uniform(-2, 2, (512, CELLS))
    network = TrainSettings(epochs=epochs, conv=ConvTrunk("logk", (CELLS,)))
    output = OutputSpec.from_dict({"name": "head", "units": "m", "names": [f"W{k + 1}" for k in range(len(WELLS))]})
    trained = train_surrogate(x, simulate(x), directory, space=space, output=output, network=network,
                              plan=TrainingPlan(members=members, derivative_points=0), seed=0)
    return sensitivity.load_surrogate(trained.path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--points", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    import sensitivity
    from sensitivity.engine.ensemble import compile_ensemble

    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        ensemble = trained_ensemble(Path(tmp), args.members, args.epochs)
        k = ensemble.n_members
        member = compile_ensemble(ensemble)
        autodiff = compile_ensemble(ensemble, path="autodiff")
        singles = [sensitivity.compile_jacobian(m) for m in ensemble.members]
        mean = sensitivity.compile_jacobian(ensemble)
        print(f"{CELLS} cells -> {len(WELLS)} wells, {k} members, {ensemble.dtype}, {member.mode} mode; best of "
              f"{args.rounds} rounds over {args.points} points")
        print(f"  member path: {member.path} ({member.path_reason}), chunks of {member.chunk_size}")
        print(f"  autodiff path: {autodiff.path} ({autodiff.path_reason}), chunks of {autodiff.chunk_size}")
        print(f"  one member: {singles[0].path} path, chunks of {singles[0].chunk_size}; ensemble mean: {mean.path} "
              f"path ({mean.path_reason}), chunks of {mean.chunk_size}")
        x = np.random.default_rng(1).uniform(-2, 2, (args.points, CELLS)).astype(np.float32)
        calls = {"member path": lambda p: member(p)[1], "autodiff path": lambda p: autodiff(p)[1],
                 f"{k} engines": lambda p: np.stack([e(p)[1] for e in singles]),
                 "one member": lambda p: singles[0](p)[1][None], "ensemble mean": lambda p: mean(p)[1][None]}
        reference = calls["member path"](x[:256]).mean(axis=0)
        scale = np.abs(reference).max()
        for name, call in calls.items():  # every contender compiled, and checked, before any timing
            got = call(x[:256])
            if name == "one member":  # member 0 of the K engines
                continue
            error = np.abs(got.mean(axis=0) - reference).max() / scale  # the mean (the calibrated spread keeps it)
            print(f"  {name} vs member path: max |difference| of the members' mean {error:.1e} of the largest entry")
            assert error < 1e-4, (name, error)
        best = {name: np.inf for name in calls}
        for _ in range(args.rounds):  # interleaved: every contender once per round
            for name, call in calls.items():
                start = time.perf_counter()
                call(x)
                best[name] = min(best[name], time.perf_counter() - start)
    one = best["one member"]
    for name, seconds in best.items():
        jacobians = args.points * (1 if name in ("one member", "ensemble mean") else k)
        print(f"  {name:>14}: {seconds:6.3f} s, {jacobians / seconds:9,.0f} member Jacobians/s, "
              f"{args.points / seconds:9,.0f} points/s ({seconds / one:.2f}x one member's time)")
    print(f"  member path / {k} engines: {best[f'{k} engines'] / best['member path']:.2f}x faster; "
          f"/ autodiff path: {best['autodiff path'] / best['member path']:.2f}x faster")


if __name__ == "__main__":
    main()
