"""hookline's conformance suite: the distribution ``hookline-conformance`` (the package
``hookline_conformance``), also shipped inside hookline's wheel as ``hookline.spec``.

``python -m hookline_conformance --adapter module:factory`` runs it (``suite.py`` has the
options). Its modules import each other relatively, so the one source folder serves under
both names, and as ``python -m spec`` from a checkout.
"""
