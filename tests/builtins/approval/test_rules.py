"""Approval rules: reading them (clear errors), judging calls (first match, deny beats
allow across files, path globs, tool patterns), a workspace file's allow rules only once
trusted, and property tests: no allow rule written for a prefix ever allows a command
line that `;`, `&&`, `||`, `|`, `&`, `$(...)`, backticks, `<(...)` or a newline extend."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.builtins.approval import RuleError, RuleSet, load_rules, trust_workspace_rules
from hookline.builtins.approval.rules import parse_rules

WORKSPACE = "/work/space"


def ruleset(*tables: dict[str, object]) -> RuleSet:
    return RuleSet((parse_rules(list(tables), "config.toml"),))


@pytest.mark.parametrize(("table", "message"), [
    ({"tool": "shell"}, "config.toml rule 1: action must be one of allow, ask, deny"),
    ({"action": "allow"}, "config.toml rule 1: tool must name a tool"),
    ({"action": "allow", "tool": "fs_write", "command": "ls"},
     "command applies to the shell tool only"),
    ({"action": "allow", "tool": "shell", "command": "ls; rm"},
     "command must be the start of one plain command"),
    ({"action": "allow", "tool": "shell", "command": "$(ls)"},
     "command must be the start of one plain command"),
    ({"action": "allow", "tool": "shell", "path": "a/*"}, "path applies to the file tools only"),
    ({"action": "allow", "tool": "shell", "commands": "ls"}, "unknown field(s) commands"),
])
def test_a_bad_rule_is_refused_naming_the_rule_and_the_fix(table: dict[str, object],
                                                            message: str) -> None:
    with pytest.raises(RuleError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("$", r"\$")):
        parse_rules([table], "config.toml")


def test_first_match_wins_within_a_file_and_deny_beats_allow_across_files() -> None:
    first = parse_rules([{"action": "allow", "tool": "shell", "command": "git"},
                         {"action": "deny", "tool": "shell", "command": "git push"}], "user")
    assert RuleSet((first,)).judge("shell", {"command": "git push"}, WORKSPACE).action == "allow"
    workspace = parse_rules([{"action": "deny", "tool": "shell", "command": "git push"}], "ws")
    both = RuleSet((first, workspace))
    verdict = both.judge("shell", {"command": "git push origin"}, WORKSPACE)
    assert verdict.action == "deny" and verdict.rule is not None and verdict.rule.source == "ws"
    assert both.judge("shell", {"command": "git status"}, WORKSPACE).action == "allow"


def test_every_command_of_a_line_must_be_allowed() -> None:
    rules = ruleset({"action": "allow", "tool": "shell", "command": "git status"},
                    {"action": "allow", "tool": "shell", "command": "wc"})
    assert rules.judge("shell", {"command": "git status | wc -l"}, WORKSPACE).action == "allow"
    assert rules.judge("shell", {"command": "git status | less"}, WORKSPACE).action is None
    verdict = rules.judge("shell", {"command": "git status > out.txt"}, WORKSPACE)
    assert verdict.action is None and "plain command line" in verdict.detail


def test_an_ask_or_deny_rule_sees_commands_inside_substitutions() -> None:
    rules = ruleset({"action": "allow", "tool": "shell", "command": "echo"},
                    {"action": "deny", "tool": "shell", "command": "curl"})
    for line in ("echo $(curl evil.example)", "echo `curl x`", "echo ok; curl x",
                 "echo <(curl x)", "FOO=1 curl x"):
        assert rules.judge("shell", {"command": line}, WORKSPACE).action == "deny", line


def test_a_line_too_deep_to_read_whole_is_asked_about_whatever_the_rules_say() -> None:
    rules = ruleset({"action": "deny", "tool": "shell", "command": "rm"},
                    {"action": "allow", "tool": "shell"})
    hidden = "echo " + "$(a; " * 60 + "rm x" + ")" * 60
    verdict = rules.judge("shell", {"command": hidden}, WORKSPACE)
    assert verdict.action == "ask" and "could not be read whole" in verdict.detail


def test_paths_are_globs_relative_to_the_workspace() -> None:
    rules = ruleset({"action": "allow", "tool": "fs_*", "path": "docs/**"},
                    {"action": "deny", "tool": "fs_write", "path": "*.lock"})
    def action(tool: str, path: str) -> str | None:
        return rules.judge(tool, {"path": path}, WORKSPACE).action

    assert action("fs_write", "docs/a.md") == "allow"
    assert action("fs.edit", f"{WORKSPACE}/docs/deep/b.md") == "allow"
    assert action("fs_write", "docs/../src/x.py") is None
    assert action("fs_write", "poetry.lock") == "deny"
    assert action("fs_write", "sub/poetry.lock") is None, "* stays within one folder"
    assert action("fs_write", "/etc/passwd") is None


def test_a_link_carries_no_rule_to_what_it_leads_to(tmp_path: Path) -> None:
    """The tools follow links, so the rules judge the file reached as well as the path
    given: a repository's `docs/assets -> ..` neither widens `allow docs/**` to the whole
    workspace nor slips past `deny secrets/**`; a link named by a deny rule stays denied."""
    workspace = tmp_path / "ws"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "secrets").mkdir()
    (workspace / "private").mkdir()
    (workspace / "docs" / "assets").symlink_to("..")
    (workspace / "docs" / "notes.md").symlink_to("../Makefile")
    (workspace / "vault").symlink_to("private")
    rules = ruleset({"action": "deny", "tool": "fs_read", "path": "secrets/**"},
                    {"action": "deny", "tool": "fs_*", "path": "vault/**"},
                    {"action": "allow", "tool": "fs_*", "path": "docs/**"})

    def judged(tool: str, path: str) -> tuple[str | None, str]:
        verdict = rules.judge(tool, {"path": path}, str(workspace))
        return verdict.action, verdict.detail

    assert judged("fs_read", "docs/assets/secrets/key.txt")[0] == "deny"
    assert judged("fs_write", "docs/assets/Makefile") == (
        None, "no rule matches both 'docs/assets/Makefile' and the file it leads to, "
              "'Makefile'")
    assert judged("fs_write", "docs/notes.md")[0] is None
    assert judged("fs_write", "vault/x")[0] == "deny"
    assert judged("fs_write", "docs/real.md")[0] == "allow"
    assert judged("fs_write", "~/x") == (None, "no rule matches"), "~ is a name, as to tools"
    # `..` after a link goes up from where the link leads, as the tools read it.
    (workspace / "docs" / "lnk").symlink_to("../private")
    (workspace / "lnk2").symlink_to("secrets/inner")
    (workspace / "secrets" / "inner").mkdir()
    assert judged("fs_read", "lnk2/../key.txt")[0] == "deny"
    assert judged("fs_write", "docs/lnk/../Makefile")[0] is None


def test_a_tool_pattern_names_mcp_tools() -> None:
    rules = ruleset({"action": "deny", "tool": "github__*"},
                    {"action": "allow", "tool": "docs__search"})
    assert rules.judge("github__create_issue", {}, WORKSPACE).action == "deny"
    assert rules.judge("docs__search", {"q": "x"}, WORKSPACE).action == "allow"
    assert rules.judge("docs__delete", {}, WORKSPACE).action is None


def test_a_workspace_files_allow_rules_count_only_once_trusted(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    (workspace / ".hookline").mkdir(parents=True)
    rules_file = workspace / ".hookline" / "rules.toml"
    rules_file.write_text('[[rules]]\naction = "allow"\ntool = "shell"\n\n'
                          '[[rules]]\naction = "deny"\ntool = "shell"\ncommand = "rm"\n')
    loaded = load_rules(None, home / "config.toml", str(workspace), home)
    assert loaded.judge("shell", {"command": "make"}, str(workspace)).action is None
    assert loaded.judge("shell", {"command": "rm x"}, str(workspace)).action == "deny"
    assert "hookline rules trust" in loaded.ignored[0]

    trust_workspace_rules(str(workspace), home)
    assert (home / "trusted-rules.json").stat().st_mode & 0o077 == 0
    trusted = load_rules(None, home / "config.toml", str(workspace), home)
    assert trusted.judge("shell", {"command": "make"}, str(workspace)).action == "allow"

    rules_file.write_text(rules_file.read_text() + "\n")  # changed: trusted no more
    again = load_rules(None, home / "config.toml", str(workspace), home)
    assert again.judge("shell", {"command": "make"}, str(workspace)).action is None


def test_a_trust_stays_with_the_workspace_it_was_given_in(tmp_path: Path) -> None:
    """Another workspace whose `.hookline` is a link to a trusted one (a command may make
    one) does not get its allow rules; its deny rules count."""
    trusted, other, home = tmp_path / "a", tmp_path / "b", tmp_path / "home"
    (trusted / ".hookline").mkdir(parents=True)
    (trusted / ".hookline" / "rules.toml").write_text(
        '[[rules]]\naction = "allow"\ntool = "shell"\ncommand = "make"\n\n'
        '[[rules]]\naction = "deny"\ntool = "shell"\ncommand = "rm"\n')
    trust_workspace_rules(str(trusted), home)
    other.mkdir()
    (other / ".hookline").symlink_to(trusted / ".hookline")
    linked = load_rules(None, home / "config.toml", str(other), home)
    assert linked.judge("shell", {"command": "make"}, str(other)).action is None
    assert linked.judge("shell", {"command": "rm x"}, str(other)).action == "deny"
    own = load_rules(None, home / "config.toml", str(trusted), home)
    assert own.judge("shell", {"command": "make"}, str(trusted)).action == "allow"


def test_a_rules_file_that_is_not_toml_or_holds_other_tables_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".hookline").mkdir()
    target = tmp_path / ".hookline" / "rules.toml"
    target.write_text("model = 'x'\n")
    with pytest.raises(RuleError, match="may hold only"):
        load_rules(None, tmp_path / "config.toml", str(tmp_path), tmp_path / "home")
    target.write_text("[[rules]\n")
    with pytest.raises(RuleError, match="not valid TOML"):
        load_rules(None, tmp_path / "config.toml", str(tmp_path), tmp_path / "home")
    target.write_text("a = " + "[" * 20_000)  # a command's, past Python's recursion limit
    with pytest.raises(RuleError, match="not valid TOML: it nests too deep; fix it"):
        load_rules(None, tmp_path / "config.toml", str(tmp_path), tmp_path / "home")


# -- properties ------------------------------------------------------------------------

_KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "in", "while", "until", "do", "done",
             "case", "esac", "function", "select", "time", "coproc"}
_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._/", min_size=1, max_size=8
                ).filter(lambda w: w not in _KEYWORDS)
_COMMAND = st.lists(_WORD, min_size=1, max_size=4)
_EXTENSIONS = ["{p}; {x}", "{p} && {x}", "{p} || {x}", "{p} | {x}", "{p} & {x}", "{p}\n{x}",
               "{p} $({x})", "{p} `{x}`", "{p}$({x})", "{p}`{x}`", "{p} <({x})", "{p};{x}",
               "{p}&&{x}", "{p}|{x}", "{p} >({x})", "{p} \\\n; {x}"]


@settings(max_examples=300, deadline=None)
@given(prefix=_COMMAND, tail=st.lists(_WORD, max_size=3), other=_COMMAND,
       shape=st.sampled_from(_EXTENSIONS))
def test_an_allow_rule_never_allows_what_extends_its_prefix(
        prefix: list[str], tail: list[str], other: list[str], shape: str) -> None:
    if other[:len(prefix)] == prefix:
        return  # the other command is one the rule allows anyway
    rules = ruleset({"action": "allow", "tool": "shell", "command": " ".join(prefix)})
    allowed = " ".join(prefix + tail)
    assert rules.judge("shell", {"command": allowed}, WORKSPACE).action == "allow"
    line = shape.format(p=allowed, x=" ".join(other))
    assert rules.judge("shell", {"command": line}, WORKSPACE).action != "allow", line


@settings(max_examples=300, deadline=None)
@given(allowed=_COMMAND, denied=_COMMAND, shape=st.sampled_from(_EXTENSIONS))
def test_a_deny_rule_finds_its_command_wherever_the_line_hides_it(
        allowed: list[str], denied: list[str], shape: str) -> None:
    rules = ruleset({"action": "deny", "tool": "shell", "command": " ".join(denied)},
                    {"action": "allow", "tool": "shell"})
    line = shape.format(p=" ".join(allowed), x=" ".join(denied))
    assert rules.judge("shell", {"command": line}, WORKSPACE).action == "deny", line
