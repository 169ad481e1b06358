"""Figures from result datasets, one module per result type (matplotlib, Agg backend, files only)."""
import matplotlib

matplotlib.use("Agg")
