"""``python -m hookline_conformance`` (``python -m spec`` in a checkout, ``python -m
hookline.spec`` with hookline): the conformance runner."""

from .suite import main

raise SystemExit(main(prog=f"python -m {__package__}"))
