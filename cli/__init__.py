"""hookline.cli: the ``hookline`` command line; the application is built in ``app``."""

import gc


def main(argv: list[str] | None = None) -> None:
    """Console script entry point: ``app.main`` with the start-up spared garbage collection.

    Start-up creates tens of thousands of objects that live as long as the process
    (modules, classes, functions, the command tree). The cyclic collector would scan them
    over and over while they are created and once more at exit, finding nothing: about a
    fifth of a short command's run time. So collection is off while the application is
    imported and built, and what exists then is frozen (``gc.freeze``: moved to a
    generation no collection visits) before the command runs with collection back on.
    Only this entry point does it: calling ``app.main`` in a process of one's own (tests,
    embedding) leaves that process's collector alone.
    """
    gc.disable()
    try:
        from .app import main as run

        run(argv, started=_collect_from_now_on)
    except KeyboardInterrupt:  # Ctrl-C before a command took over its signals (imports)
        raise SystemExit(130) from None
    finally:
        gc.enable()  # also when the application could not be built


def _collect_from_now_on() -> None:
    gc.freeze()
    gc.enable()
