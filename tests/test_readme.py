"""The README's quickstart and CI agree: .ci/run runs exactly the README's test command."""
from __future__ import annotations

import re

from tests.helpers import ROOT


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_the_readme_test_command():
    first, second = readme_commands()[:2]
    assert "sensitivity run" in first and "pytest" in second
    assert second in (ROOT / ".ci" / "run").read_text().splitlines()
