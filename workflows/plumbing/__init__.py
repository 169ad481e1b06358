"""The plumbing under the commands: config -> settings, result sets, the study chain, naming, the registry.

The command modules (``workflows/<verb>.py``) are thin: each wires a config to a library verb through these
modules and writes its result. Imports point down: a command imports the plumbing, the report and the library,
never another command; the plumbing imports no command (``tests/test_layout.py``).
"""
