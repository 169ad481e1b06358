"""The documentation builds and runs: the site in strict mode, and every command and Python block of README.md,
docs/**/*.md and the README that `sensitivity init` writes (workflows/init.py FILES["README.md"]).

How a page runs (one test per page, its blocks in order, in one working folder):

- the folder is a fresh ``tmp_path`` with the repository's ``data/`` linked in, so the documented relative paths
  (``data/seir/observations.nc``) resolve as in the repository root; init's README runs in a folder made by
  ``sensitivity init``, and a page's own ``sensitivity init DIR && cd DIR`` moves into the folder it makes;
- a shell block (bash, sh, console) is split into commands (``\\`` continuations joined, ``&&`` split, comments
  dropped): ``sensitivity ...`` runs in this process through :func:`workflows.cli.main` (one TensorFlow import for
  all; multirun jobs are still separate processes), ``cd DIR`` moves, ``compliance-checker`` and ``sha256sum`` run
  as subprocesses, and any other program (pip, python benchmarks/..., the venv lines) is not run
  (:data:`NOT_RUN` lists them; an unknown program fails the test, so nothing is skipped silently);
- small sizes: every workflow whose primary config has a ``debug`` group gets ``debug=default``
  (conf/debug/default.yaml: small sizes for every workflow's keys), and a command-line value of a key that file sets
  is followed by the file's value (the command line beats a config file otherwise), and figures are not drawn
  (``plots=false``: tests/test_plots.py and the workflow tests draw them; here they would double the time);
- multiruns run two shards (``range(0,N)`` and ``grid.num_shards=N`` become 2), and ``hydra/launcher=slurm`` runs as
  ``hydra/launcher=submitit_local`` (submitit's local executor, the cluster's code path) without the SLURM-only
  launcher keys;
- ``sensitivity run`` is not rerun here (minutes): tests/workflows/test_run.py runs the default study;
- a Python block is executed in one namespace per page, in the working folder (on ``sys.path``, as in a session
  started there); a block with a ``title="PATH"`` is a file: it is written to PATH instead;
- ``<!-- no-run -->`` on the line before a block skips it (only where running it is impossible here; each such
  block says why in the text around it).

A command that exits non-zero, or a block that raises, fails its page's test.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT

DOCS = ROOT / "docs"
NO_RUN = "<!-- no-run -->"
SHELL = {"bash", "sh", "shell", "console"}
#: Programs a shell block may call that are not run here, with the reason.
NOT_RUN = {
    "pip": "installs packages",
    "python3": "makes the virtual environment (the test runs in one)",
    ".venv/bin/pip": "installs packages",
    ".venv/bin/python": "the test suite itself",
    ".venv/bin/sensitivity": "the default study (tests/workflows/test_run.py)",
    "python": "benchmarks and data scripts take minutes (benchmarks/, data/)",
    "mkdocs": "test_the_site_builds_in_strict_mode builds it",
}
#: Programs run as subprocesses in the working folder.
SUBPROCESS = {"compliance-checker": str(Path(sys.executable).parent / "compliance-checker"), "sha256sum": "sha256sum",
              "ls": "ls"}
DEBUG = ROOT / "conf" / "debug" / "default.yaml"


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    line: int
    lang: str
    title: str | None
    text: str
    run: bool


FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order."""
    lines, found, previous, i = text.splitlines(), [], "", 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            previous = lines[i].strip() or previous
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].startswith(indent + fence) and not lines[j].strip(" `~")):
            body.append(lines[j][len(indent):])
            j += 1
        title = re.search(r'title="([^"]+)"', info)
        found.append(Block(i + 1, (info.split() or [""])[0].lower(), title[1] if title else None,
                           "\n".join(body) + "\n", previous != NO_RUN))
        previous, i = "", j + 1
    return found


def shell_commands(text: str) -> list[list[str]]:
    """The commands of a shell block: continuations joined, comments dropped, ``&&`` and ``;`` split."""
    commands = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        command: list[str] = []
        for token in shlex.split(line, comments=True):
            if token in ("&&", ";"):
                commands.append(command)
                command = []
            else:
                command.append(token)
        commands.append(command)
    return [c for c in commands if c]


# ----------------------------------------------------------------------------- small sizes


def _flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def debug_values() -> dict[str, Any]:
    """The keys conf/debug/default.yaml sets, dotted, with its values."""
    return _flatten(yaml.safe_load(DEBUG.read_text()))


def has_debug(workflow: str) -> bool:
    """Whether ``conf/<workflow>.yaml`` lists a ``debug`` group in its defaults."""
    path = ROOT / "conf" / f"{workflow}.yaml"
    defaults = yaml.safe_load(path.read_text()).get("defaults", []) if path.is_file() else []
    return any(isinstance(item, dict) and "debug" in item for item in defaults)


def _local_launcher_keys() -> set[str]:
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf

    return {f.name for f in dataclasses.fields(LocalQueueConf)}


def small(argv: list[str]) -> list[str]:
    """A documented ``sensitivity`` command at the sizes of a test (the module docstring's rules)."""
    workflow, args = argv[0], list(argv[1:])
    if workflow.startswith("-") or not has_debug(workflow):
        return argv
    if "-m" in args or "--multirun" in args:
        args = [re.sub(r"range\(0, *\d+\)", "range(0,2)", a) if a.startswith("grid.shard=") else
                "grid.num_shards=2" if a.startswith("grid.num_shards=") else a for a in args]
    if "hydra/launcher=slurm" in args:
        local = _local_launcher_keys()
        args = ["hydra/launcher=submitit_local" if a == "hydra/launcher=slurm" else a for a in args
                if not a.startswith("hydra.launcher.") or a.split("=")[0].split(".")[2] in local]
    given = {a.split("=")[0].lstrip("+") for a in args if "=" in a}
    args += [f"{key}={value}" for key, value in debug_values().items() if key in given]
    if not any(a.startswith("debug=") for a in args):
        args.append("debug=default")
    if "plots" not in given:
        args.append("plots=false")
    return [workflow, *args]


# ----------------------------------------------------------------------------- running a page


class Page:
    """Runs a page's blocks in order in one working folder, with one namespace for its Python blocks."""

    def __init__(self, name: str, cwd: Path):
        self.name, self.root, self.cwd, self.namespace = name, cwd, cwd, {"__name__": "__docs__"}
        self.timings: list[tuple[float, float, str]] = []  # wall [s], CPU of this process [s], what
        self.not_run: list[str] = []

    def run(self, block: Block) -> None:
        where = f"{self.name}:{block.line}"
        if not block.run:
            return
        if block.title:
            target = self.cwd / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text)
        elif block.lang in SHELL:
            for command in shell_commands(block.text):
                self.command(command, where)
        elif block.lang == "python":
            start, path = (time.perf_counter(), time.process_time()), sys.path[:]
            sys.path.insert(0, str(self.cwd))  # as a Python session started in the working folder
            try:
                with _inside(self.cwd):
                    exec(compile(block.text, where, "exec"), self.namespace)
            finally:
                sys.path[:] = path
            self.timed(start, f"python block at line {block.line}")

    def command(self, command: list[str], where: str) -> None:
        program = command[0]
        if program == "cd":
            self.cwd = (self.cwd / command[1]).resolve()
            return
        start = time.perf_counter(), time.process_time()
        if program == "sensitivity":
            if command[1:2] == ["run"]:
                self.not_run.append(shlex.join(command))
                return
            argv = small(command[1:])
            code = _sensitivity(argv, self.cwd)
            _forget_modules_under(self.root)  # each command is a fresh process in a shell: model.py is read anew
            assert code == 0, f"{where}: `{shlex.join(command)}` exited {code} (run as `sensitivity " \
                              f"{shlex.join(argv)}`)"
        elif program in SUBPROCESS:
            done = subprocess.run([SUBPROCESS[program], *command[1:]], cwd=self.cwd, capture_output=True, text=True)
            assert done.returncode == 0, f"{where}: `{shlex.join(command)}` exited {done.returncode}:\n" \
                                         f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        else:
            assert program in NOT_RUN, f"{where}: `{shlex.join(command)}`: add {program!r} to NOT_RUN or run it"
            self.not_run.append(shlex.join(command))
            return
        self.timed(start, shlex.join(command))

    def timed(self, start: tuple[float, float], what: str) -> None:
        self.timings.append((time.perf_counter() - start[0], time.process_time() - start[1], what))

    def report(self) -> str:
        """Wall and CPU seconds of each command and block (CPU: this process only, not a multirun's jobs)."""
        lines = [f"{wall:6.1f} s {cpu:6.1f} s CPU  {what}" for wall, cpu, what in self.timings]
        lines += [f"      not run          {what}" for what in self.not_run]
        total = [sum(t[i] for t in self.timings) for i in (0, 1)]
        return "\n".join([f"{self.name}: {total[0]:.1f} s, {total[1]:.1f} s CPU", *lines])


class _inside:
    """Work in ``path``; restore the working directory after."""

    def __init__(self, path: Path):
        self.path, self.saved = path, None

    def __enter__(self):
        self.saved = os.getcwd()
        os.chdir(self.path)

    def __exit__(self, *exc):
        os.chdir(self.saved)


def _sensitivity(argv: list[str], cwd: Path) -> int:
    """Run ``sensitivity *argv`` in this process from ``cwd``; return its exit status.

    Hydra's global state, the root logger's handlers, ``sys.argv`` and ``sys.path`` are restored after, so
    commands do not leak into each other or into other tests.
    """
    from hydra.core.global_hydra import GlobalHydra

    from workflows.cli import main

    root = logging.getLogger()
    handlers, level, argv_saved, path_saved = root.handlers[:], root.level, sys.argv[:], sys.path[:]
    GlobalHydra.instance().clear()
    try:
        with _inside(cwd):
            main(argv)
        return 0
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        GlobalHydra.instance().clear()
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        sys.argv[:], sys.path[:] = argv_saved, path_saved


def _forget_modules_under(folder: Path) -> None:
    """Drop modules imported from ``folder`` (a study's ``model.py``), so the next command imports its own."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(folder.resolve()):
            del sys.modules[name]


# ----------------------------------------------------------------------------- the pages


def page_texts() -> dict[str, str]:
    """Every documented page with code: README.md, docs/**/*.md, and the README `sensitivity init` writes."""
    from workflows.init import FILES

    texts = {"README.md": (ROOT / "README.md").read_text()}
    texts.update({str(p.relative_to(ROOT)): p.read_text() for p in sorted(DOCS.rglob("*.md"))})
    texts["init:README.md"] = FILES["README.md"]
    return texts


RUNNABLE = [name for name, text in page_texts().items()
            if any(b.run and (b.lang in SHELL or b.lang == "python" or b.title) for b in blocks(text))]


def check_python_api(namespace: dict) -> None:
    """The flood notebook of the Python API tutorial against the closed form of the model and the truth."""
    import numpy as np

    from sensitivity import select
    from tests.helpers.flood import flood_sobol_indices

    q, ks, zv, zm = namespace["space"].nominal
    h = (q / (ks * 300.0 * np.sqrt((zm - zv) / 5000.0))) ** 0.6
    np.testing.assert_allclose(namespace["values"][0, 0], h, rtol=1e-12)
    np.testing.assert_allclose(namespace["jacobian"][0, 0, 0], 0.6 * h / q, rtol=1e-10)  # dH/dQ = 0.6 H / Q
    np.testing.assert_allclose(namespace["fit"].estimate.isel(start=0).values, [35.0, 50.3], rtol=1e-6)  # the truth
    for name, (s1, st) in flood_sobol_indices().items():  # N = 4096 base rows
        assert float(select(namespace["indices"], output="H", parameter=name).S1) == pytest.approx(s1, abs=0.01), name
        assert float(select(namespace["indices"], output="H", parameter=name).ST) == pytest.approx(st, abs=0.01), name
    spread = select(namespace["spread"], output="H")
    mc = select(spread, propagation_method="monte_carlo")
    first = select(spread, propagation_method="first_order")
    assert abs(float(first.output_mean - mc.output_mean)) < 0.05 * float(mc.output_std)


#: Checks of a page's results after its blocks ran, against independent references.
CHECKS = {"docs/tutorials/python-api.md": check_python_api}


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE)
def test_every_block_of_the_page_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # as activated
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "data").symlink_to(ROOT / "data", target_is_directory=True)
    page = Page(name, cwd)
    if name.startswith("init:"):
        page.command(["sensitivity", "init", "study"], "sensitivity init")
        page.cwd = cwd / "study"
    try:
        for block in blocks(page_texts()[name]):
            page.run(block)
        if name in CHECKS:
            CHECKS[name](page.namespace)
    finally:
        _forget_modules_under(cwd)
        print(page.report())


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path):
    done = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-5000:]
    assert (tmp_path / "site" / "reference" / "analyses" / "calibration" / "index.html").is_file()


# ----------------------------------------------------------------------------- fast checks


def readme_blocks() -> list[Block]:
    return blocks((ROOT / "README.md").read_text())


def test_ci_runs_the_readme_test_command():
    """The README's first block is setup-and-run and setup-and-test; .ci/run runs exactly the second."""
    first, second = [line for line in readme_blocks()[0].text.splitlines() if line.strip()][:2]
    assert first.endswith(".venv/bin/sensitivity run") and second.endswith(".venv/bin/python -m pytest -q -n 2 --dist loadfile")
    assert second in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_readme_is_concise_and_links_into_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    linked = set(re.findall(r"\]\((docs/[^)#]+)", text))
    assert linked and all((ROOT / link).is_file() for link in linked), sorted(linked)
    figures = re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)
    assert len(figures) == 1 and (ROOT / figures[0]).is_file()


def test_every_shell_command_is_run_or_named_as_not_run():
    """No documented program is skipped silently: each is run here, or NOT_RUN says why not."""
    known = {"sensitivity", "cd", *SUBPROCESS, *NOT_RUN}
    for name, text in page_texts().items():
        for block in blocks(text):
            if block.lang in SHELL and block.run and not block.title:
                for command in shell_commands(block.text):
                    assert command[0] in known, f"{name}:{block.line}: {shlex.join(command)}"


def test_small_sizes_follow_the_debug_file():
    debug = debug_values()
    assert small(["sweep", "grid.n=10000000"]) == ["sweep", "grid.n=10000000", f"grid.n={debug['grid.n']}",
                                                   "debug=default", "plots=false"]
    assert small(["sweep", "-m", "grid.shard=range(0,64)", "grid.num_shards=64", "hydra/launcher=slurm",
                  "hydra.launcher.partition=gpu", "hydra.launcher.timeout_min=120"]) == [
        "sweep", "-m", "grid.shard=range(0,2)", "grid.num_shards=2", "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=120", "debug=default", "plots=false"]
    assert small(["--help"]) == ["--help"]
    assert small(["init", "mystudy"]) == ["init", "mystudy"]


# ----------------------------------------------------------------------------- the configuration reference

ABSENT = "—"


def reference_tables() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """docs/configuration.md: the shared section's ``{key: default cell}`` and each workflow's."""
    shared: dict[str, str] = {}
    workflows: dict[str, dict[str, str]] = {}
    for section in re.split(r"^## ", (DOCS / "configuration.md").read_text(), flags=re.M)[1:]:
        title = section.splitlines()[0]
        rows = dict(re.findall(r"^\| `([^`]+)` \| (.+?) \| ", section, re.M))
        if title.startswith("Shared keys"):
            shared = rows
        else:
            workflows[re.fullmatch(r"`(\w+)`", title.strip())[1]] = rows
    return shared, workflows


def own_configs() -> dict[str, dict]:
    """Every workflow's composed config with only its own keys, as plain containers."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from workflows.plumbing.registry import CONF_DIR, WORKFLOWS
    from workflows.plumbing.schema import own_config, register

    register()
    configs = {}
    for name in WORKFLOWS:
        GlobalHydra.instance().clear()
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            configs[name] = OmegaConf.to_container(own_config(compose(name), name), resolve=False)
    GlobalHydra.instance().clear()
    return configs


def study_config(name: str) -> dict:
    """``name``'s composed config with only its own keys, in a study folder made by ``sensitivity init``
    (``experiment=study``), as plain containers."""
    import tempfile

    from omegaconf import OmegaConf

    from tests.helpers.study_config import compose_in_study, init_study
    from workflows.plumbing.schema import own_config

    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose_in_study(init_study(Path(tmp) / "study"), name)
        return OmegaConf.to_container(own_config(cfg, name), resolve=False)


def _leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, dict) or not tree:
        return {prefix[:-1]: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(_leaves(value, f"{prefix}{key}."))
    return out


def _lookup(tree: dict, key: str) -> Any:
    for part in key.split("."):
        tree = tree[part]
    return tree


def test_the_configuration_reference_has_every_key_and_its_defaults():
    """Every key of every workflow is in docs/configuration.md (a documented key covers what is below it), every
    documented key exists, and every stated default is the composed config's."""
    shared, documented = reference_tables()
    configs = own_configs()
    configs["train"] = study_config("train")  # what a user's study gets, not the packaged demo's preset
    assert set(documented) | {"sweep"} == set(configs)  # the sweep's keys are the shared ones
    documented.setdefault("sweep", {})
    for name, config in configs.items():
        keys = {**shared, **documented[name]}
        leaves = [k for k in _leaves(config) if k != "output_dir"]
        missing = [k for k in leaves if not any(k == d or k.startswith(f"{d}.") for d in keys)]
        assert missing == [], f"{name}: keys not in docs/configuration.md: {missing}"
        for key, cell in documented[name].items():
            assert any(k == key or k.startswith(f"{key}.") for k in leaves), f"{name}: `{key}` is not a key"
            if cell != ABSENT:
                assert yaml.safe_load(cell.strip("`")) == _lookup(config, key), (name, key, cell)
    for key, cell in shared.items():
        if cell != ABSENT:
            assert yaml.safe_load(cell.strip("`")) == _lookup(configs["sweep"], key), ("sweep", key, cell)


def test_the_package_page_lists_every_registered_study_with_its_verbs_settings_and_result_kinds():
    """The reference's table of studies is the registry's (``sensitivity.studies.STUDIES``), row for row."""
    from sensitivity.studies import STUDIES, public

    def names(part):
        return ", ".join(f"`{public(entry)[0]}`" for entry in part) or "none"

    expected = [f"| `{s.name}` | {names(s.verbs)} | {names(s.settings)} | "
                f"{', '.join(k.name for k in s.kinds) or 'none'} |" for s in STUDIES]
    page = (ROOT / "docs" / "reference" / "package.md").read_text().splitlines()
    assert [line for line in page if line.startswith("| `")] == expected
