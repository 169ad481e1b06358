#!/usr/bin/env bash
# Regenerate data/seir/ (see data/seir/README.md): the trained surrogate, its training samples and validation
# report, the 5-member ensemble trained on the same samples, and the synthetic observations. Same seed, same
# machine: the same numbers, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
"$BIN/sensitivity" train experiment=seir training.members=1 export_dir=data/seir
"$BIN/sensitivity" train experiment=seir training.data=data/seir/training.nc hydra.run.dir=outputs/train/seir_ensemble
rm -rf data/seir/surrogate.ensemble && cp -r outputs/train/seir_ensemble/surrogate.ensemble data/seir/
"$BIN/python" data/make_seir_observations.py data/seir/observations.nc
