"""One page per study: ``report.html`` of a run directory, rendered from a Jinja2 template.

The page is self-contained (figures embedded as PNG data URIs, CSS inline, no JavaScript, no external
resource) and has a section per stage with its command, the key numbers of its results as tables and its
figures; every warning of the run; and the provenance of every result. :func:`render_report` writes it.

* :mod:`.run_dir`: what a run directory holds (stages, result files, figures, commands);
* :mod:`.kinds`: which kind of result a dataset is, and the library's ``summary(ds)`` of it (the one its workflow
  logged: ``sensitivity.analyses.<study>.summary``, ``sensitivity.sweep.summary``);
* :mod:`.results`: one result file with its provenance; :mod:`.notices`: the warnings its results record;
* :mod:`.page`: the page's content as plain data;
* :mod:`.render`: the template (``templates/report.html.j2``) and the atomic write.
"""
from __future__ import annotations

from workflows.report.render import REPORT_NAME, render_report

__all__ = ["REPORT_NAME", "render_report"]
