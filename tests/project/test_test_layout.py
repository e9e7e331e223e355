"""The builtins tests mirror the source: one test folder per folder of `builtins/`.

A test of `builtins/store/` is in `tests/builtins/store/`, and so on; `tests/builtins/plugin/`
holds the tests of `builtins/plugin.py`. Nothing is directly in `tests/builtins/`: a test
module there has no folder to say what it tests, and any Python module there (a conftest.py
too) makes pytest put `tests/builtins/` on `sys.path`, where its folder `bub/` passes for
the Bub package (`importlib.util.find_spec("bub")`) and switches the Bub layer on.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def folders_with_tests(tests: Path) -> list[Path]:
    """The folders under `tests` that hold Python files (a folder left with only caches
    does not count)."""
    return sorted(path for path in tests.iterdir()
                  if path.is_dir() and not path.name.startswith((".", "__"))
                  and any("__pycache__" not in found.parts for found in path.rglob("*.py")))


def source_names(source: Path) -> set[str]:
    """What a test folder may be named after: the packages of `source`, and `plugin` for
    `plugin.py`."""
    names = {path.name for path in source.iterdir() if (path / "__init__.py").is_file()}
    if (source / "plugin.py").is_file():
        names.add("plugin")
    return names


def layout_problems(tests: Path, source: Path) -> list[str]:
    """What is out of place in `tests` (the builtins tests) against `source` (builtins/)."""
    where = f"{tests.parent.name}/{tests.name}"
    problems = []
    for path in sorted(tests.glob("*.py")):
        if path.name.startswith("test_"):
            problems.append(f"{path.name} is a test module directly in {where}/: move it "
                            "to the folder of the builtins folder it tests")
        else:
            problems.append(f"{path.name} is directly in {where}/: a module there puts "
                            f"{where}/ on sys.path; put it in the folder that uses it")
    names = source_names(source)
    for folder in folders_with_tests(tests):
        if folder.name not in names:
            problems.append(f"{where}/{folder.name}/ tests no folder of {source.name}/ "
                            f"(the folders: {', '.join(sorted(names))})")
    return problems


def test_the_builtins_tests_mirror_the_builtins_folders() -> None:
    assert len(folders_with_tests(ROOT / "tests" / "builtins")) > 10  # the layout was read
    assert layout_problems(ROOT / "tests" / "builtins", ROOT / "builtins") == []


def make_layout(root: Path, tests: dict[str, str], source: list[str]) -> tuple[Path, Path]:
    """A `tests/builtins` folder with the given files and a `builtins` folder with the
    given packages (a name ending in .py is a module)."""
    for name, text in tests.items():
        path = root / "tests" / "builtins" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "tests" / "builtins").mkdir(parents=True, exist_ok=True)
    for name in source:
        path = root / "builtins" / name
        if name.endswith(".py"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")
        else:
            path.mkdir(parents=True)
            (path / "__init__.py").write_text("", encoding="utf-8")
    return root / "tests" / "builtins", root / "builtins"


def test_a_layout_that_mirrors_the_source_passes(tmp_path: Path) -> None:
    tests, source = make_layout(
        tmp_path,
        {"store/test_store.py": "", "store/conftest.py": "", "plugin/test_plugin.py": "",
         "__pycache__/test_old.cpython-311.pyc": "", "tape/__pycache__/stale.py": ""},
        ["store", "tape", "plugin.py"])
    assert layout_problems(tests, source) == []


def test_a_test_module_directly_in_the_folder_fails(tmp_path: Path) -> None:
    tests, source = make_layout(tmp_path, {"test_store.py": "", "store/test_more.py": ""},
                                ["store"])
    assert layout_problems(tests, source) == [
        "test_store.py is a test module directly in tests/builtins/: move it to the folder of the "
        "builtins folder it tests"]


def test_a_conftest_directly_in_the_folder_fails(tmp_path: Path) -> None:
    tests, source = make_layout(tmp_path, {"conftest.py": ""}, ["store"])
    (problem,) = layout_problems(tests, source)
    assert problem.startswith("conftest.py is directly in tests/builtins/: ")


def test_a_test_folder_without_its_source_folder_fails(tmp_path: Path) -> None:
    tests, source = make_layout(
        tmp_path, {"storage/test_store.py": "", "plugin/test_plugin.py": ""},
        ["store", "notes"])
    (source / "loose").mkdir()  # a folder that is no package names no test folder
    (tests / "loose").mkdir()
    (tests / "loose" / "test_loose.py").write_text("", encoding="utf-8")
    assert layout_problems(tests, source) == [
        "tests/builtins/loose/ tests no folder of builtins/ (the folders: notes, store)",
        "tests/builtins/plugin/ tests no folder of builtins/ (the folders: notes, store)",
        "tests/builtins/storage/ tests no folder of builtins/ (the folders: notes, store)"]
