"""The command line's own logic: workflow listing and the positional argument of `merge`."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import CLI, ROOT
from workflows import merge
from workflows.cli import _positional
from workflows.plumbing.registry import WORKFLOWS, available


def test_every_workflow_is_listed_with_one_line():
    listed = available()
    assert set(listed) == {"run", "sweep", "train", "calibrate", "posterior", "propagate", "indices", "reliability",
                           "worth", "verify", "multifidelity", "export", "merge", "simulate"}
    assert all(summary and "\n" not in summary for summary in listed.values())


def test_merge_takes_its_directory_as_a_bare_argument(tmp_path):
    assert _positional(merge, ["multirun/sweep", "format=zarr"]) == ["input_dir='multirun/sweep'", "format=zarr"]
    odd = tmp_path / "a=b"  # an existing directory whose name looks like an override
    odd.mkdir()
    assert _positional(merge, [str(odd)]) == [f"input_dir='{odd}'"]
    assert _positional(merge, ["input_dir=x"]) == ["input_dir=x"]
    assert _positional(merge, ["--cfg", "job"]) == ["--cfg", "job"]


def test_a_key_appended_past_the_schema_is_refused_with_a_suggestion(compose_config):
    import pytest

    from sensitivity.errors import ConfigError
    from workflows.plumbing.schema import own_config

    own_config(compose_config("sweep", ["grid.seed=3", "+model.kwargs.zz=1"]), "sweep")  # free-form
    with pytest.raises(ConfigError, match=r"unknown key `grid.seeed`: .*did you mean `grid.seed`\?$") as err:
        own_config(compose_config("sweep", ["+grid.seeed=3"]), "sweep")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"unknown key `colour`"):
        own_config(compose_config("sweep", ["+colour=red"]), "sweep")


@pytest.mark.parametrize("workflow, override, key, leaf", [
    ("train", "training.simulator_kwargs={gain: 2.5}", "training.simulator_kwargs", "gain"),
    ("sweep", "model.kwargs={table: t.txt}", "model.kwargs", "table"),
])
def test_a_mapping_of_keyword_arguments_given_whole_is_refused_saying_how_to_give_it(capsys, workflow, override, key,
                                                                                   leaf):
    """``key={a: 1}`` merges into the config's mapping, which Hydra refuses as "not in struct" (a user's own kwargs
    cannot be given that way); the one line now says the form that works, and that form composes to the value
    given (Hydra, the oracle)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from workflows.cli import _check_composition, _compose
    from workflows.plumbing.schema import register

    register()
    try:
        with pytest.raises(SystemExit) as ended:
            _check_composition(workflow, ["training.simulator=sensitivity.simulators.analytic:quadratic", override])
        said = capsys.readouterr().err.strip()
        assert ended.value.code == 2 and "\n" not in said
        assert said.endswith(f"`{key}` is a mapping of your own keys, given one by one: `+{key}.{leaf}=...` (a "
                             "mapping given whole is merged into the config's own)")
        value = OmegaConf.create(override.partition("=")[2])[leaf]
        cfg = _compose(workflow, ["training.simulator=sensitivity.simulators.analytic:quadratic",
                                  f"+{key}.{leaf}={value}"], None)
        assert OmegaConf.select(cfg, key)[leaf] == value
    finally:  # the composition set Hydra's job config of this process: a later in-process `run` would pass its
        HydraConfig.instance().cfg = None  # overrides on to every stage


def _group_options() -> dict[str, list[str]]:
    """Every config group of ``conf/`` (``hydra/launcher`` included) and its options."""
    from workflows.plumbing.registry import CONF_DIR

    groups = {d.name: d for d in CONF_DIR.iterdir() if d.is_dir() and d.name != "hydra"}
    groups["hydra/launcher"] = CONF_DIR / "hydra" / "launcher"
    return {name: sorted(p.stem for p in path.glob("*.yaml")) for name, path in sorted(groups.items())}


def test_every_workflow_composes_with_every_option_of_its_groups_and_fits_its_schema():
    """Each primary config, alone and with each option of each group it lists (experiment, debug and the
    launcher too), composes through Hydra and passes its schema: types, and no key the schema lacks."""
    import importlib
    import importlib.util

    import yaml
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from workflows.plumbing.registry import CONF_DIR, WORKFLOWS
    from workflows.plumbing.schema import own_config, register

    register()
    options = _group_options()
    composed = set()
    for name, module in WORKFLOWS.items():
        listed = [next(iter(item)).removeprefix("optional ") if isinstance(item, dict) else item
                  for item in yaml.safe_load((CONF_DIR / f"{name}.yaml").read_text())["defaults"]]
        assert listed[0] == f"{name}_schema", f"conf/{name}.yaml must list its schema first"
        cases = [[]] + [[f"{group}={option}"] for group in options if group in listed or group == "hydra/launcher"
                        for option in options[group]]
        for overrides in cases:
            if overrides == ["hydra/launcher=slurm"] and not importlib.util.find_spec(
                    "hydra_plugins.hydra_submitit_launcher"):
                continue  # the SLURM launcher's schema comes with the optional `slurm` extra
            GlobalHydra.instance().clear()
            with initialize_config_dir(str(CONF_DIR), version_base=None):
                cfg = compose(name, overrides=overrides, return_hydra_config=True)
            if overrides[:1] and overrides[0].startswith("hydra/launcher="):
                assert cfg.hydra.launcher._target_, overrides
            job = OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])
            own_config(job, name)
            composed.add((name, *overrides))
    GlobalHydra.instance().clear()
    assert {case[1].split("=")[0] for case in composed if len(case) > 1} == set(options)  # every group was reached


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["train", "--cfg", "job"], ["export", "--cfg", "job"]])
def test_help_and_config_composition_do_not_import_tensorflow(args):
    """The schemas come from TF-free library settings (sensitivity.settings): no TensorFlow before a run."""
    script = ("import sys\nfrom workflows.cli import main\nsys.argv = ['sensitivity', *sys.argv[1:]]\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print('imported:', sorted({'tensorflow', 'keras'} & set(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "imported: []"


#: Modules a config error, ``--cfg job`` and ``init`` must not import (sensitivity.runtime.lazy defers the last three).
HEAVY = ("tensorflow", "keras", "tensorflow_probability", "scipy.stats", "xarray", "netCDF4")


@pytest.mark.slow
def test_config_errors_and_printed_configs_import_no_heavy_module(tmp_path):
    """Every workflow's ``--cfg job`` and a config error (a bad type and an unknown key, refused at composition)
    import neither TensorFlow nor scipy.stats, xarray or netCDF4; nor does ``init``. One subprocess runs the calls
    in turn and reads ``sys.modules`` after each, so a leak is named with the first call that imported it."""
    script = ("import contextlib, io, json, sys\n"
              "from workflows.cli import main\n"
              "from workflows.plumbing.registry import WORKFLOWS\n"
              f"heavy = {HEAVY!r}\n"
              "calls = [[name, *args] for name in WORKFLOWS for args in (['--cfg', 'job'], ['grid.n=abc'],\n"
              "                                                          ['no_such_key=1'])] + [['init', 'study']]\n"
              "report = []\n"
              "for argv in calls:\n"
              "    out, err, code = io.StringIO(), io.StringIO(), 0\n"
              "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
              "        try:\n"
              "            main(argv)\n"
              "        except SystemExit as stop:\n"
              "            code = stop.code or 0\n"
              "    report.append([argv, code, err.getvalue()[-300:], [m for m in heavy if m in sys.modules]])\n"
              "print(json.dumps(report))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    assert len(report) == 3 * len(WORKFLOWS) + 1
    for argv, code, stderr, imported in report:
        expected = 2 if argv[1:] in (["grid.n=abc"], ["no_such_key=1"]) else 0
        assert code == expected, (argv, stderr)
        assert imported == [], f"sensitivity {' '.join(argv)} imported {imported}"
    assert (tmp_path / "study" / "conf").is_dir()


@pytest.mark.parametrize("override, quoted", [("calibration=élan.nc", "calibration='élan.nc'"),
                                              ("calibration=l'été.nc", 'calibration="l\'été.nc"')])
def test_a_non_ascii_letter_in_an_unquoted_override_says_to_quote_the_value(capsys, override, quoted):
    """Hydra's lexer refuses the unquoted letter (LexerNoViableAltException); the one line ends with the override
    quoted, which Hydra's own parser (the oracle) reads back as the value written."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from workflows.cli import _check_composition
    from workflows.plumbing.schema import register

    register()
    try:
        with pytest.raises(SystemExit) as ended:
            _check_composition("worth", [override])
        said = capsys.readouterr().err.strip()
        assert ended.value.code == 2 and "\n" not in said
        assert said.startswith("sensitivity worth: LexerNoViableAltException") and said.endswith(
            f"; quote the value: {quoted}")
    finally:
        HydraConfig.instance().cfg = None
        GlobalHydra.instance().clear()
    parsed = OverridesParser.create().parse_override(quoted)
    assert parsed.key_or_group == "calibration" and parsed.value() == override.partition("=")[2]


@pytest.mark.parametrize("value", ["/home/me/stüdy/outputs/run/sweep", "/tmp/a b/é 1", "it's", "a\\b", "end\\",
                                   "q\\'x", "x,y=z"])
def test_an_override_the_application_writes_reads_back_unchanged(value):
    """Hydra's own parser (the oracle) reads every value back as written: an unquoted path with a non-ASCII letter
    failed to lex (LexerNoViableAltException), which stopped `sensitivity run` in a folder named `stüdy`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from workflows.plumbing.naming import override

    parsed = OverridesParser.create().parse_override(override("output_dir", value))
    assert parsed.key_or_group == "output_dir" and parsed.value() == value


@pytest.mark.slow
def test_a_study_in_a_folder_named_with_a_non_ascii_letter_runs(tmp_path):
    folder = tmp_path / "stüdy"
    assert subprocess.run(CLI + ["init", str(folder)], capture_output=True).returncode == 0
    (folder / "conf/experiment/tiny.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /model: study\n  - override /space: study\n"
        "grid: {n: 16, through: distribution}\npropagation: {n_samples: 256}\n"
        "stages:\n  - {name: sweep, workflow: sweep}\n"
        "  - {name: propagate, workflow: propagate, inputs: {pointwise.sweep: sweep}}\n")
    done = subprocess.run(CLI + ["run", "experiment=tiny"], cwd=folder, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = folder / "outputs/run/tiny"
    assert (run_dir / "sweep/sweep.nc").is_file() and (run_dir / "propagate/propagation.nc").is_file()


@pytest.mark.slow
def test_an_output_dir_that_cannot_be_written_is_refused_in_one_line(tmp_path):
    """`output_dir=` on a read-only file system was an `OSError [Errno 30]` traceback. As a non-root user: a folder
    without write permission; as root: an immutable one (both refused by the kernel as a read-only mount is)."""
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode != 0:
            pytest.skip("root, and this file system cannot make a folder immutable (chattr +i)")
    else:
        locked.chmod(0o555)
    try:
        done = subprocess.run(CLI + ["sweep", "grid.n=4", f"output_dir={locked}/out"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(locked)], capture_output=True)
        else:
            locked.chmod(0o755)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "cannot write the run directory" in line]
    assert len(lines) == 1 and f"{locked}/out" in lines[0] and lines[0].endswith("or set output_dir")
    assert list(locked.iterdir()) == [] and not (tmp_path / "outputs").exists()


def test_a_run_directory_on_a_read_only_file_system_is_one_line(tmp_path, monkeypatch):
    """Where the run directory is made (a composed config, a stage of `sensitivity run`): errno 30 -> one line."""
    import errno
    from pathlib import Path

    from omegaconf import OmegaConf

    from sensitivity.errors import DataError
    from workflows.plumbing.build import output_dir

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    target = tmp_path / "ro" / "run"
    with pytest.raises(DataError, match=f"^cannot write {target}: read-only file system; "):
        output_dir(OmegaConf.create({"output_dir": str(target)}))


#: The interval's level under its old names (one name per concept, docs/glossary.md), the workflow that took each.
RENAMED = [("indices", "intervals.conf_level", "intervals.level"),
           ("multifidelity", "multifidelity.conf_level", "multifidelity.level"),
           ("reliability", "importance.confidence", "importance.level"),
           ("reliability", "subset.confidence", "subset.level"),
           ("reliability", "monte_carlo.confidence", "monte_carlo.level")]


@pytest.mark.parametrize("workflow, old, new", RENAMED, ids=[old for _, old, _ in RENAMED])
def test_an_old_name_of_the_level_is_refused_in_one_line_naming_the_new_key(capsys, workflow, old, new):
    """On the command line (Hydra's composition error) and appended past the schema (``+old=...``, the schema check),
    the one line names the new key; the new key composes to the value given (Hydra, the oracle)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from workflows.cli import _check_composition, _compose
    from workflows.plumbing.schema import register

    register()
    try:
        for override in (f"{old}=0.9", f"+{old}=0.9"):
            with pytest.raises(SystemExit) as ended:
                _check_composition(workflow, [override])
            assert ended.value.code == 2
            assert capsys.readouterr().err.strip() == f"sensitivity {workflow}: `{old}` is now `{new}`"
        assert OmegaConf.select(_compose(workflow, [f"{new}=0.9"], None), new) == 0.9
    finally:
        HydraConfig.instance().cfg = None
        GlobalHydra.instance().clear()


def test_an_old_name_of_the_level_in_a_users_yaml_is_refused_before_any_output(tmp_path):
    """An experiment file of the user's own (``--config-dir``) with the old key: exit 2, the one line, and no run
    folder made."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\nintervals:\n  conf_level: 0.9\n")
    done = subprocess.run(CLI + ["indices", "--config-dir", ".", "experiment=mine"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "sensitivity indices: `intervals.conf_level` is now `intervals.level`"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiment"]
