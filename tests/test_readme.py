"""The README's quickstart and CI agree: .ci/run runs exactly the README's test command."""
from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readme_test_command():
    first, second = readme_commands()[:2]
    assert "sensitivity run" in first and "pytest" in second
    assert second in (ROOT / ".ci" / "run").read_text().splitlines()


def python_api_block() -> str:
    section = (ROOT / "README.md").read_text().split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_python_api_section_runs_and_its_results_hold(tmp_path, monkeypatch):
    """The README's notebook example, executed; checked against the closed form of the model and the truth."""
    import numpy as np

    from sensitivity import select

    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(python_api_block(), "README.md#python-api", "exec"), namespace)
    q, ks, zv, zm = namespace["space"].nominal
    h = (q / (ks * 300.0 * np.sqrt((zm - zv) / 5000.0))) ** 0.6
    np.testing.assert_allclose(namespace["values"][0, 0], h, rtol=1e-12)
    np.testing.assert_allclose(namespace["jacobian"][0, 0, 0], 0.6 * h / q, rtol=1e-10)  # dH/dQ = 0.6 H / Q
    fit = namespace["fit"]
    best = fit.estimate.isel(start=0).values
    np.testing.assert_allclose(best, [35.0, 50.3], rtol=1e-6)  # the truth of the synthetic levels
    from tests.helpers.flood import flood_sobol_indices

    indices = namespace["indices"]
    for name, (s1, st) in flood_sobol_indices().items():  # N = 4096 base rows
        assert float(select(indices, output="H", parameter=name).S1) == pytest.approx(s1, abs=0.01), name
        assert float(select(indices, output="H", parameter=name).ST) == pytest.approx(st, abs=0.01), name
    spread = select(namespace["spread"], output="H")
    mc = spread.sel(propagation_method_name="monte_carlo")
    assert abs(float(spread.sel(propagation_method_name="first_order").output_mean - mc.output_mean)) < 0.05 * float(mc.output_std)
