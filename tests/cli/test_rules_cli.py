"""`hookline rules check` and `hookline rules trust` through the console script: which
rule decides a call and what the policy then does, a workspace file's allow rules only
once trusted (and no longer once changed), an invalid rules file as one error line, and
the config file's rules checked at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from terminal_support import clean_env

HOOKLINE = Path(sys.executable).parent / "hookline"
CONFIG = """
[[rules]]
action = "allow"
tool = "shell"
command = "git status"

[[rules]]
action = "deny"
tool = "shell"
command = "git push"
reason = "I push myself"
"""


def rules(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if not (home / "config.toml").exists():
        (home / "config.toml").write_text(CONFIG)
    return subprocess.run([str(HOOKLINE), "rules", *args], cwd=workspace, text=True,
                          env=clean_env(home), capture_output=True, timeout=60)


def test_check_names_the_rule_and_what_the_policy_does(tmp_path: Path) -> None:
    allowed = rules(tmp_path, "check", "shell git status -s")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.splitlines()[0].startswith("rule: allow (tool = 'shell', command = "
                                                     "'git status'; ")
    assert "approval = on-request: runs" in allowed.stdout
    denied = rules(tmp_path, "check", "shell git status && git push origin main")
    assert "'git push origin main' matches deny" in denied.stdout
    assert "approval = on-request: denied (denied by a rule (I push myself)" in denied.stdout
    hidden = rules(tmp_path, "check", "shell git status $(curl evil.example)")
    assert "rule: no rule" in hidden.stdout and "no rule matches 'curl evil.example'" in \
        hidden.stdout
    asked = rules(tmp_path, "check", "--approval", "ask", "fs_write docs/a.md")
    assert "approval = ask: asks you first" in asked.stdout


def test_trust_lets_a_workspace_files_allow_rules_count_until_it_changes(
        tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / ".hookline"
    folder.mkdir(parents=True)
    (folder / "rules.toml").write_text('[[rules]]\naction = "allow"\ntool = "shell"\n'
                                       'command = "make"\n')
    before = rules(tmp_path, "check", "--approval", "ask", "shell make test")
    assert "rule: no rule" in before.stdout
    assert "do not count: the file came with the workspace" in before.stderr
    trusted = rules(tmp_path, "trust")
    assert trusted.returncode == 0 and trusted.stdout.startswith("trusted: ")
    after = rules(tmp_path, "check", "--approval", "ask", "shell make test")
    assert "approval = ask: runs" in after.stdout and not after.stderr
    with (folder / "rules.toml").open("a") as handle:
        handle.write('\n[[rules]]\naction = "allow"\ntool = "*"\n')
    changed = rules(tmp_path, "check", "--approval", "ask", "shell rm -rf /")
    assert "rule: no rule" in changed.stdout and "do not count" in changed.stderr


def test_an_invalid_rules_file_is_one_error_line(tmp_path: Path) -> None:
    folder = tmp_path / "workspace" / ".hookline"
    folder.mkdir(parents=True)
    (folder / "rules.toml").write_text('[[rules]]\naction = "permit"\ntool = "shell"\n')
    done = rules(tmp_path, "check", "shell ls")
    assert done.returncode == 1
    assert done.stderr.startswith("error: ")
    assert "rules.toml rule 1: action must be one of allow, ask, deny, got 'permit'" in \
        done.stderr


def test_a_broken_rule_of_the_config_file_stops_the_start(tmp_path: Path) -> None:
    """Not only the first tool call that needs the rules: `run` says it before any turn."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[[rules]]\naction = "alow"\ntool = "shell"\n')
    done = subprocess.run([str(HOOKLINE), "run", "hi"], cwd=tmp_path, text=True,
                          env=clean_env(home), capture_output=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert "config.toml rule 1: action must be one of allow, ask, deny, got 'alow'" in \
        done.stderr


def test_a_setting_written_below_the_rules_is_said_to_be_one(tmp_path: Path) -> None:
    """TOML puts `max_steps` after a `[[rules]]` header into that rule."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[[rules]]\naction = "ask"\ntool = "shell"\n'
                                      'max_steps = 2\n')
    done = subprocess.run([str(HOOKLINE), "run", "hi"], cwd=tmp_path, text=True,
                          env=clean_env(home), capture_output=True, timeout=60)
    assert done.returncode == 1
    assert ("unknown field(s) max_steps; a rule has action, tool, command (shell), path "
            "(file tools) and reason; max_steps is a setting, which TOML puts in this table "
            "when written below its header") in done.stderr

