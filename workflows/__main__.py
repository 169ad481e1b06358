"""``python -m workflows`` is the ``sensitivity`` command."""
from workflows.cli import main

main()
