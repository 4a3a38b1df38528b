"""The lab: what the project measures the engine with, kept out of the product.

It depends on the engine and never the other way round (an import-linter contract):

* :mod:`lab.synth` — generated multi-site data (``f2tta synth``): the same labelled anatomy seen
  through several sites' appearance;
* :mod:`lab.reviewer` — a simulated reviewer who answers each site's review queue with the
  dataset's labels;
* :mod:`lab.bench` — the F²TTA benchmark and the committed suites (``f2tta bench``,
  ``f2tta bench-suite``), their caches, replays and reports;
* :mod:`lab.cli` — those commands, which ``f2tta`` dispatches to when the lab is present;
* :mod:`lab.demo` — ``make demo``: generated sites through the shipped demo model.

The research scripts in ``scripts/`` and the benchmarks in ``benchmarks/`` use it.
"""
