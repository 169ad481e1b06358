"""Figures from result datasets, one module per result type (matplotlib, files only).

Every figure lays out the model's outputs through :mod:`sensitivity.plots.layout` (a panel per label,
the numeric coordinate as x with its units, fields as maps), whatever the output's shape.
The backend is the caller's choice: the workflows select Agg (``workflows.plumbing.build.file_backend``), a notebook keeps its own.
"""
