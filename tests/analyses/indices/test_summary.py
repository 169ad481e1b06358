"""The summary of an ensemble's indices: its ranking table shows, beside each index and its sampling interval, the
combined interval (sampling and surrogate error) and the members' std, as the dataset holds them."""
from __future__ import annotations

import numpy as np
import xarray as xr

from sensitivity.analyses.indices.summary import summary
from sensitivity.datasets.summary import log_lines


def ensemble_indices() -> xr.Dataset:
    """Sobol' ST of three parameters on one output, with sampling and combined intervals and a surrogate std."""
    st = np.array([[0.55], [0.31], [0.02]])
    sampling = np.stack([st - 0.03, st + 0.03], axis=-1)
    combined = np.stack([st - 0.08, st + 0.09], axis=-1)
    dims = ("parameter", "output")
    return xr.Dataset(
        {"sobol_ST": (dims, st, {"units": "1"}), "sobol_ST_interval": ((*dims, "bound"), sampling, {"units": "1"}),
         "sobol_ST_combined_interval": ((*dims, "bound"), combined, {"units": "1"}),
         "sobol_ST_surrogate_std": (dims, np.array([[0.021], [0.0104], [0.003]]), {"units": "1"})},
        coords={"parameter_name": ("parameter", ["a", "b", "c"]), "output_name": ("output", ["y"]),
                "bound_name": ("bound", ["low", "high"])}, attrs={"methods": "sobol", "title": "indices"})


def test_the_ranking_shows_the_combined_interval_and_the_surrogate_std_beside_the_sampling_one():
    ds = ensemble_indices()
    (table,) = summary(ds).tables
    assert table.columns == ("parameter", "Sobol' total ST", "Sobol' total ST: combined interval",
                             "Sobol' total ST: surrogate std")
    for row, j in zip(table.rows, range(3)):
        low, high = ds["sobol_ST_interval"].values[j, 0]
        clow, chigh = ds["sobol_ST_combined_interval"].values[j, 0]
        assert row[0].text == "abc"[j]
        assert (row[1].text, row[1].detail) == (f"{ds['sobol_ST'].values[j, 0]:.4g}", f"[{low:.4g}, {high:.4g}]")
        assert row[2].text == f"[{clow:.4g}, {chigh:.4g}]"
        assert row[3].text == f"{ds['sobol_ST_surrogate_std'].values[j, 0]:.3g}"
    assert "combined interval: sampling and surrogate error" in table.note
    lines = [line for _, line in log_lines(summary(ds))]
    assert "  a  Sobol' total ST 0.55 [0.52, 0.58]; Sobol' total ST: combined interval [0.47, 0.64]; Sobol' total " \
           "ST: surrogate std 0.021" in lines


def test_without_an_ensemble_there_is_no_combined_column():
    ds = ensemble_indices().drop_vars(["sobol_ST_combined_interval", "sobol_ST_surrogate_std"])
    (table,) = summary(ds).tables
    assert table.columns == ("parameter", "Sobol' total ST")
