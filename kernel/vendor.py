"""Copy the kernel into another project (docs/vendoring.md):

    python -m hookline.kernel.vendor DEST --package NAME [--core] [--keep-identity]

DEST, a folder that must not exist yet, receives the whole kernel (or, with ``--core``,
the dispatch core alone) without caches, and the licence text as ``LICENSE``. A whole
kernel also gets an identity of its own in ``_identity.py``: the entry point group
``NAME`` and the environment prefix ``NAME_`` (upper case), so that in a process where
hookline is installed too it never loads hookline's plugins nor reads ``HOOKLINE_*``
variables; ``--keep-identity`` keeps hookline's. Nothing outside DEST is touched.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEFT_OUT = ("__pycache__", "*.pyc", "vendor.py")
"""What a copy never holds: caches, and this tool (the copy keeps `_generate.py`, which it
needs after a hook is added to its `hooks.py`)."""
_IDENTITY_LINES = {
    "ENTRY_POINT_GROUP": re.compile(r'^ENTRY_POINT_GROUP: Final = "[^"]*"$', re.M),
    "ENV_PREFIX": re.compile(r'^ENV_PREFIX: Final = "[^"]*"$', re.M),
}


def vendor(dest: Path, package: str, core: bool = False, keep_identity: bool = False) -> Path:
    """Make the copy; returns DEST. ValueError (with what to do) on a bad name or DEST."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", package):
        raise ValueError(f"--package must be a Python identifier (it names the entry point "
                         f"group and the variables' prefix), got {package!r}")
    if dest.exists():
        raise ValueError(f"{dest} exists: give a folder to create (the copy never merges "
                         f"into one)")
    import shutil  # a tool's import: `import hookline.kernel.vendor` stays cheap

    licence = licence_text()
    shutil.copytree(HERE / "_dispatch" if core else HERE, dest,
                    ignore=shutil.ignore_patterns(*LEFT_OUT))
    (dest / "LICENSE").write_text(licence, encoding="utf-8")
    if not core and not keep_identity:
        identity = dest / "_identity.py"
        text = identity.read_text(encoding="utf-8")
        for name, value in (("ENTRY_POINT_GROUP", package),
                            ("ENV_PREFIX", f"{package.upper()}_")):
            text, count = _IDENTITY_LINES[name].subn(f'{name}: Final = "{value}"', text)
            if count != 1:
                raise RuntimeError(f"{identity}: expected one {name} line to rewrite")
        identity.write_text(text, encoding="utf-8")
    return dest


def licence_text() -> str:
    """hookline's LICENSE: beside the kernel in a checkout, else in the installed wheel."""
    beside = HERE.parent / "LICENSE"
    if beside.is_file():
        return beside.read_text(encoding="utf-8")
    from importlib import metadata

    for file in metadata.distribution("hookline").files or []:
        if file.name == "LICENSE":
            return file.read_text(encoding="utf-8")
    raise RuntimeError("hookline's LICENSE was not found (neither beside the kernel nor in "
                       "the installed distribution); copy it by hand")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m hookline.kernel.vendor",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="the folder to create")
    parser.add_argument("--package", required=True,
                        help="your project's name: the copy's entry point group and the "
                             "prefix (upper case) of the variables it reads")
    parser.add_argument("--core", action="store_true", help="copy the dispatch core alone")
    parser.add_argument("--keep-identity", action="store_true",
                        help="keep hookline's entry point group and HOOKLINE_ prefix")
    args = parser.parse_args(argv)
    try:
        dest = vendor(args.dest, args.package, args.core, args.keep_identity)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    what = "the dispatch core" if args.core else "the kernel"
    identity = ("" if args.core or args.keep_identity else
                f"; it loads plugins from the entry point group {args.package!r} and reads "
                f"{args.package.upper()}_* variables")
    print(f"copied {what} to {dest} with its LICENSE{identity}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
