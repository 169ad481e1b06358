"""A ParameterSpace as a SALib problem and back; SALib (the oracle) samples the same marginals."""
from __future__ import annotations

import json

import numpy as np
import pytest
from SALib import ProblemSpec
from SALib.util import _nonuniform_scale_samples

from sensitivity.errors import ConfigError, DataError
from sensitivity.interop.salib import from_problem, read_problem, to_problem, write_problem
from sensitivity.inputs.space import ParameterSpace

RECORDS = [
    {"name": "a", "units": "m", "low": 0.0, "high": 2.0, "long_name": "length"},
    {"name": "b", "units": "s", "low": 1.0, "high": 3.0, "distribution": {"kind": "triangular", "mode": 1.5}},
    {"name": "c", "units": "1", "low": -10.0, "high": 10.0, "distribution": {"kind": "normal", "mean": 0.5, "std": 2.0}},
    {"name": "d", "units": "day-1", "low": 0.01, "high": 100.0, "scale": "log", "nominal": 2.0,
     "distribution": {"kind": "lognormal", "median": 1.0, "sigma_log": 0.5}},
    {"name": "e", "units": "K", "low": 0.0, "high": 5.0, "distribution": {"kind": "truncnormal", "mean": 1.0, "std": 2.0}},
]
CORRELATION = np.eye(5)
CORRELATION[0, 1] = CORRELATION[1, 0] = 0.4


def test_round_trip_is_lossless(tmp_path):
    space = ParameterSpace.from_records(RECORDS, CORRELATION)
    problem = to_problem(space)
    assert problem["dists"] == ["unif", "triang", "norm", "lognorm", "truncnorm"]
    assert problem["units"] == ["m", "s", "1", "day-1", "K"] and problem["num_vars"] == 5
    back = from_problem(problem)
    assert back.parameters == space.parameters
    np.testing.assert_array_equal(back.correlation, space.correlation)
    path = write_problem(space, tmp_path / "problem.json")
    assert json.loads(path.read_text())["names"] == list("abcde")
    assert read_problem(path).parameters == space.parameters


def test_salib_samples_the_same_marginals():
    """SALib's own transform of unit-cube points under our problem equals our marginals' inverse CDFs."""
    space = ParameterSpace.from_records(RECORDS)
    problem = to_problem(space)
    u = np.random.default_rng(0).uniform(0.001, 0.999, (500, 5))
    salib = _nonuniform_scale_samples(u.copy(), problem["bounds"], problem["dists"])
    ours = np.column_stack([p.frozen_distribution().ppf(u[:, i]) for i, p in enumerate(space.parameters)])
    np.testing.assert_allclose(salib, ours, rtol=1e-12, atol=1e-12)
    spec = ProblemSpec(problem)  # SALib accepts the extra keys
    spec.sample_sobol(8, calc_second_order=False)
    assert spec.samples.shape == (8 * 7, 5)


def test_a_plain_salib_problem_is_a_space(tmp_path):
    (tmp_path / "problem.yaml").write_text(
        "num_vars: 3\nnames: [x1, x2, x3]\nbounds: [[-3.14, 3.14], [0, 1], [2, 0.5]]\ndists: [unif, unif, norm]\n")
    space = read_problem(tmp_path / "problem.yaml")
    assert space.names == ["x1", "x2", "x3"] and space.units == ["1", "1", "1"]
    np.testing.assert_allclose(space.bounds, [[-3.14, 3.14], [0, 1], [2 - 5 * 0.5, 2 + 5 * 0.5]])
    assert space.parameters[2].distribution.params == {"mean": 2.0, "std": 0.5}


@pytest.mark.parametrize("problem, error, message", [
    ({"names": ["a"], "bounds": [[1, 2]], "dists": ["logunif"]}, ConfigError, "distribution 'logunif'"),
    ({"names": ["a", "b"], "bounds": [[1, 2]]}, DataError, "`bounds` must have one entry per name"),
    ({"num_vars": 3, "names": ["a"], "bounds": [[1, 2]]}, DataError, "`num_vars` is 3"),
    ({"names": ["a"], "bounds": [[1, 2, 3]]}, DataError, "needs 2 bounds values"),
    ({"names": ["a"], "bounds": [[2, 1]]}, ConfigError, "bounds must be low < high"),
    ({"bounds": [[2, 1]]}, DataError, "missing `names`"),
])
def test_bad_problems_name_the_field(problem, error, message):
    with pytest.raises(error, match=message):
        from_problem(problem)


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="SALib problem file not found"):
        read_problem(tmp_path / "nope.json")


def test_a_space_salib_cannot_describe_is_refused_naming_the_parameter():
    from sensitivity.errors import ConfigError
    from sensitivity.interop.salib import to_problem
    from sensitivity.inputs.space import ParameterSpace

    space = ParameterSpace.from_records([{"name": "q", "units": "1",
                                          "distribution": {"kind": "gumbel_r", "loc": 0.0, "scale": 1.0}}])
    with pytest.raises(ConfigError, match="parameter 'q': distribution 'gumbel_r' has no SALib problem form"):
        to_problem(space)


def test_a_python_tag_in_a_problem_file_is_refused_in_one_line_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "space.yaml"
    path.write_text(f'parameters: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(DataError) as caught:
        read_problem(path)
    assert str(caught.value) == (
        f"SALib problem file {path} is neither JSON nor YAML: a Python tag !!python/object/apply:os.system, refused "
        "(YAML is read safely: no Python object is made, no code run) (line 1, column 13)")
    assert not marker.exists()


def test_a_binary_problem_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / "space.json"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(DataError, match=r"^SALib problem file .* is not a text file \(not UTF-8\): give JSON or YAML$"):
        read_problem(path)
