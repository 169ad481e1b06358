#!/usr/bin/env bash
# Regenerate data/seir/ (see data/seir/README.md): the trained surrogate, its training samples and validation
# report, and the synthetic observations. Same seed, same machine: the same numbers, bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${VENV:-.venv}/bin
"$BIN/sensitivity" train experiment=seir export_dir=data/seir
"$BIN/python" data/make_seir_observations.py data/seir/observations.nc
