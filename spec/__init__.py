"""hookline's conformance suite, shipped in the wheel as ``hookline.spec``.

``python -m hookline.spec --adapter module:factory`` runs it (``suite.py`` has the
options). The modules of this folder import each other by their bare names (the runner
puts this folder on ``sys.path``), so the folder also works copied alone or run from a
checkout as ``python spec/runner.py``.
"""
