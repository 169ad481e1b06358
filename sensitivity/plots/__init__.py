"""Figures from result datasets, one module per result type (matplotlib, files only).

The backend is the caller's choice: the workflows select Agg (``workflows.build.file_backend``), a notebook keeps its own.
"""
