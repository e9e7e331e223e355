"""docs/conformance-adapters.md's worked example, as written: its minimal kernel and
adapter copied out of the page pass every dispatch fixture, in a process where hookline
cannot be imported, with the summary the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from spec_support import ROOT

PAGE = ROOT / "docs" / "conformance-adapters.md"


def test_the_worked_example_passes_the_dispatch_fixtures(tmp_path: Path) -> None:
    page = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(# (\w+\.py)\n.*?)```", page, re.S)
    assert [name for _, name in blocks] == ["tinyhooks.py", "my_adapter.py"]
    for text, name in blocks:
        (tmp_path / name).write_text(text, encoding="utf-8")
    code = (f"import sys; sys.modules['hookline'] = None; sys.path.insert(0, {str(ROOT)!r})\n"
            "from spec.suite import main; raise SystemExit(main(sys.argv[1:]))")
    for backend in ("asyncio", "trio"):
        done = subprocess.run([sys.executable, "-c", code, "--adapter", "./my_adapter.py:make",
                               "--backend", backend], cwd=tmp_path, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        summary = done.stdout.splitlines()[-1]
        assert summary.startswith("37 passed, 0 failed, 91 skipped, 0 failed as expected"), \
            done.stdout
    shown = " ".join(page[page.index("prints one `SKIP` line"):].split())
    assert summary.replace("trio", "asyncio") in shown.replace("`", "")
