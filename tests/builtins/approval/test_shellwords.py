"""A command line is plain only when its words are all it runs: every construct that could
run or change something else makes it not plain, and the commands hidden inside such
constructs are still listed for the deny rules. Concrete forms first, then properties over
random lines, then a comparison with what bash itself runs."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from hookline.builtins.approval.shellwords import ShellCommands, split_commands


def plain(line: str) -> tuple[tuple[str, ...], ...]:
    parsed = split_commands(line)
    assert parsed.plain, parsed.reason
    assert parsed.reason == ""
    return parsed.commands


def not_plain(line: str, reason: str) -> tuple[tuple[str, ...], ...]:
    parsed = split_commands(line)
    assert not parsed.plain
    assert reason in parsed.reason
    return parsed.commands


def test_the_result_is_a_frozen_value() -> None:
    parsed = split_commands("git status")
    assert parsed == ShellCommands((("git", "status"),), True, "")
    with pytest.raises(AttributeError):
        parsed.plain = False  # type: ignore[misc]


@pytest.mark.parametrize(("line", "commands"), [
    ("git status", [["git", "status"]]),
    ("  git\tstatus  ", [["git", "status"]]),
    ("a; b", [["a"], ["b"]]),
    ("a;b", [["a"], ["b"]]),
    ("a && b", [["a"], ["b"]]),
    ("a&&b||c", [["a"], ["b"], ["c"]]),
    ("a | b", [["a"], ["b"]]),
    ("a|b", [["a"], ["b"]]),
    ("a |& b", [["a"], ["b"]]),
    ("a & b", [["a"], ["b"]]),
    ("a&", [["a"]]),
    ("a\nb", [["a"], ["b"]]),
    ("a x; b y && c z || d | e |& f & g\nh", [["a", "x"], ["b", "y"], ["c", "z"], ["d"],
                                             ["e"], ["f"], ["g"], ["h"]]),
])
def test_separators_split_and_keep_the_line_plain(line: str, commands: list[list[str]]) -> None:
    assert plain(line) == tuple(tuple(words) for words in commands)


@pytest.mark.parametrize("line", ["", "   ", ";", "a;", ";a", ";;a;;", "a &", "\n\na\n\n",
                                  "a && ;", "|a|"])
def test_empty_commands_are_dropped(line: str) -> None:
    assert plain(line) == ((("a",),) if "a" in line else ())


@pytest.mark.parametrize(("line", "words"), [
    ("echo 'a b'", ["echo", "a b"]),
    ('echo "a b"', ["echo", "a b"]),
    ("echo a\\ b", ["echo", "a b"]),
    ("echo a''b \"\"c", ["echo", "ab", "c"]),
    ("echo '' \"\"", ["echo", "", ""]),
    ("echo 'a;b|c&d'", ["echo", "a;b|c&d"]),
    ("echo \"a;b|c&d > e\"", ["echo", "a;b|c&d > e"]),
    ("echo a\\;b a\\|b a\\&b a\\>b", ["echo", "a;b", "a|b", "a&b", "a>b"]),
    ("echo '$HOME' '`ls`' '$(ls)'", ["echo", "$HOME", "`ls`", "$(ls)"]),
    ("echo \\$HOME \\`ls\\`", ["echo", "$HOME", "`ls`"]),
    ('echo "a\\"b" "a\\\\b" "\\$x" "\\`"', ["echo", 'a"b', "a\\b", "$x", "`"]),
    ('echo "\\a\\n"', ["echo", "\\a\\n"]),
    ("echo '\\'", ["echo", "\\"]),
    ("echo 'it'\\''s'", ["echo", "it's"]),
    ("echo 'multi\nline'", ["echo", "multi\nline"]),
    ("gi\\\nt sta\\\ntus", ["git", "status"]),
    ("git \\\n status", ["git", "status"]),
    ('echo "a\\\nb"', ["echo", "ab"]),
    ("echo $ a$ $/ \"$\" '$'", ["echo", "$", "a$", "$/", "$", "$"]),
    ("git log --format=%H HEAD~1 @{u} x=1", ["git", "log", "--format=%H", "HEAD~1", "@{u}",
                                             "x=1"]),
    ("find . -name '*.py' -exec rm {} \\;", ["find", ".", "-name", "*.py", "-exec", "rm", "{}",
                                             ";"]),
    ("'A=1' b", ["A=1", "b"]),
    ("echo a{},b @{u},x x}a,b{ '{a,b}' {}", ["echo", "a{},b", "@{u},x", "x}a,b{", "{a,b}",
                                              "{}"]),
    ("1A=2 b", ["1A=2", "b"]),
    ("echo if then fi { } ! [[", ["echo", "if", "then", "fi", "{", "}", "!", "[["]),
    ("echo a\rb", ["echo", "a\rb"]),
    ("echo \ra \x0cb", ["echo", "\ra", "\x0cb"]),
    ("echo a\x0bb", ["echo", "a\x0bb"]),
])
def test_quotes_and_escapes_are_removed(line: str, words: list[str]) -> None:
    assert plain(line) == (tuple(words),)


@pytest.mark.parametrize("line", ["ls *.py", "ls ?", "ls [ab]*", "ls ~", "ls ~/x ~root",
                                  "ls a*b?c[d]", "ls **/*.txt", "ls [!a]"])
def test_globs_and_tildes_are_plain_and_kept_literally(line: str) -> None:
    assert plain(line) == (tuple(line.split()),)


@pytest.mark.parametrize(("line", "reason", "commands"), [
    ("echo $(rm -rf /)", "command substitution $(...)", [["rm", "-rf", "/"],
                                                         ["echo", "$(rm -rf /)"]]),
    ("echo a$(b)c", "command substitution", [["b"], ["echo", "a$(b)c"]]),
    ("echo $(a $(b; c) | d)", "command substitution", [["b"], ["c"], ["a", "$(b; c)"], ["d"],
                                                       ["echo", "$(a $(b; c) | d)"]]),
    ("echo $(echo ')')", "command substitution", [["echo", ")"], ["echo", "$(echo ')')"]]),
    ("echo `rm x`", "command substitution `...`", [["rm", "x"], ["echo", "`rm x`"]]),
    ("echo `a \\`b\\``", "command substitution `...`", [["b"], ["a", "`b`"],
                                                        ["echo", "`a \\`b\\``"]]),
    ('echo "$(rm x)"', "command substitution", [["rm", "x"], ["echo", "$(rm x)"]]),
    ('echo "`rm x`"', "command substitution", [["rm", "x"], ["echo", "`rm x`"]]),
    ('echo "x `echo \\"y\\"`"', "command substitution", [["echo", "y"],
                                                         ["echo", 'x `echo \\"y\\"`']]),
    ("echo $((1 + 2))", "arithmetic $((...))", [["1", "+", "2"], ["echo", "$((1 + 2))"]]),
    ("echo $(( $(rm x) ))", "arithmetic", [["rm", "x"], ["$(rm x)"],
                                           ["echo", "$(( $(rm x) ))"]]),
    ("echo $[1+2]", "arithmetic $[...]", [["echo", "$[1+2]"]]),
    ("diff <(ls a) >(wc)", "process substitution <(...)", [["ls", "a"], ["wc"],
                                                           ["diff", "<(ls a)", ">(wc)"]]),
    ("(cd x && rm y)", "subshell ( ... )", [["cd", "x"], ["rm", "y"]]),
    ("a; (b; (c)) ; d", "subshell", [["a"], ["b"], ["c"], ["d"]]),
    ("{ rm x; ls; }", "shell keyword {", [["rm", "x"], ["ls"]]),
    ("f() { rm x; }", "subshell", [["f"], ["rm", "x"]]),
    ("echo $HOME", "variable expansion $HOME", [["echo", "$HOME"]]),
    ('echo "$HOME"', "variable expansion $HOME", [["echo", "$HOME"]]),
    ("echo a$b_c-d", "variable expansion $b_c", [["echo", "a$b_c-d"]]),
    ("echo $1", "variable expansion $1", [["echo", "$1"]]),
    ("echo $@ $*", "variable expansion $@", [["echo", "$@", "$*"]]),
    ("echo $? $$ $! $# $- $_", "variable expansion $?", [["echo", "$?", "$$", "$!", "$#", "$-",
                                                          "$_"]]),
    ("echo ${x}", "parameter expansion ${...}", [["echo", "${x}"]]),
    ("echo ${x:-$(rm y)}", "parameter expansion", [["rm", "y"], ["echo", "${x:-$(rm y)}"]]),
    ("echo ${x:-'}'} z", "parameter expansion", [["echo", "${x:-'}'}", "z"]]),
    ("echo $'a\\nb'", "ANSI-C quoting $'...'", [["echo", "a\\nb"]]),
    ('echo $"hello"', 'locale quoting $"..."', [["echo", "hello"]]),
    ("ls # ; rm x", "comment #", [["ls"]]),
    ("echo a#b c# #", "comment #", [["echo", "a#b", "c#"]]),
    ("echo x;# rm", "comment #", [["echo", "x"]]),
    ("# rm x\nls", "comment #", [["ls"]]),
    ("FOO=1 git push", "variable assignment FOO=", [["git", "push"]]),
    ("GIT_SSH_COMMAND='rm -rf /' git fetch", "variable assignment GIT_SSH_COMMAND=",
     [["git", "fetch"]]),
    ("A=1 B=2 cmd x=3", "variable assignment A=", [["cmd", "x=3"]]),
    ("a[0]=1 cmd", "variable assignment a[0]=", [["cmd"]]),
    ("A+=x cmd", "variable assignment A+=", [["cmd"]]),
    ("FOO=bar", "variable assignment FOO=", []),
    ("FOO=$(rm x) ls", "command substitution", [["rm", "x"], ["ls"]]),
    ("x=(rm -rf /)", "subshell", [["rm", "-rf", "/"]]),
    ("if true; then rm x; fi", "shell keyword if", [["true"], ["rm", "x"]]),
    ("while a; do b; done", "shell keyword while", [["a"], ["b"]]),
    ("for f in a b; do rm $f; done", "shell keyword for", [["f", "in", "a", "b"],
                                                         ["rm", "$f"]]),
    ("! git status", "shell keyword !", [["git", "status"]]),
    ("time git status", "shell keyword time", [["git", "status"]]),
    ("[[ -f x ]] && rm x", "shell keyword [[", [["-f", "x", "]]"], ["rm", "x"]]),
    ("function f { rm x; }", "shell keyword function", [["f", "{", "rm", "x"]]),
    ("coproc rm x", "shell keyword coproc", [["rm", "x"]]),
    ("echo {a,b}", "brace expansion {a,b}", [["echo", "{a,b}"]]),
    ("{rm,-rf,/}", "brace expansion", [["{rm,-rf,/}"]]),
    ("echo x{1..3}", "brace expansion", [["echo", "x{1..3}"]]),
    ("echo {a}x,b}", "brace expansion", [["echo", "{a}x,b}"]]),
    ("echo 'unbalanced", "unbalanced quote", [["echo", "unbalanced"]]),
    ('echo "unbalanced', "unbalanced quote", [["echo", "unbalanced"]]),
    ("echo `ls", "unbalanced backquote", [["ls"], ["echo", "`ls"]]),
    ("echo $(ls", "unbalanced parenthesis (", [["ls"], ["echo", "$(ls"]]),
    ("echo ${x", "unbalanced {", [["echo", "${x"]]),
    ("cat $\\\nHOME/.ssh/key", "line continuation after $", [["cat", "$HOME/.ssh/key"]]),
    ('cat "$\\\nHOME"', "line continuation after $", [["cat", "$HOME"]]),
    ("echo $\\\n{x:-$(rm y)}", "line continuation after $", [["rm", "y"],
                                                               ["echo", "${x:-$(rm y)}"]]),
    ("echo x)", "unbalanced parenthesis )", [["echo", "x"]]),
    ("echo \\", "trailing backslash", [["echo"]]),
])
def test_constructs_that_make_a_line_not_plain(
        line: str, reason: str, commands: list[list[str]]) -> None:
    assert not_plain(line, reason) == tuple(tuple(words) for words in commands)


@pytest.mark.parametrize(("line", "reason"), [
    ("ls > out", "redirection >"),
    ("ls >out", "redirection >"),
    ("ls >> out", "redirection >>"),
    ("sort < in", "redirection <"),
    ("sort < /dev/null", "redirection <"),
    ("ls 2> err", "redirection 2>"),
    ("ls 2>>err", "redirection 2>>"),
    ("ls &> out", "redirection &>"),
    ("ls &>> out", "redirection &>>"),
    ("ls >| out", "redirection >|"),
    ("ls <> f", "redirection <>"),
    ("ls >&out", "redirection >&"),
    ("ls 2>&-", "redirection 2>&"),
    ("ls 3>&1x", "redirection 3>&"),
    ("ls >/dev/nullx", "redirection >"),
    ("ls >/dev/null/", "redirection >"),
    ("ls >$HOME", "variable expansion"),
    ("ls >", "redirection >"),
    ("ls > ;", "redirection >"),
    ("cat <<EOF\nrm x\nEOF", "here-document <<"),
    ("cat <<-EOF\nEOF", "here-document <<-"),
    ("cat <<< hello", "here-string <<<"),
    ("> out", "redirection >"),
    ("ls {fd}>/dev/null", "redirection {fd}>"),
    ("ls &>/dev/null", "redirection &>, which /bin/sh may read as & then >"),
])
def test_redirections_make_a_line_not_plain(line: str, reason: str) -> None:
    not_plain(line, reason)


def test_a_here_document_s_body_is_scanned_as_commands() -> None:
    assert ("rm", "x") in not_plain("cat <<EOF\nrm x\nEOF", "here-document")


@pytest.mark.parametrize(("line", "words"), [
    ("ls 2>&1", ["ls"]),
    ("ls >&2", ["ls"]),
    ("ls 1>&2 2>&1", ["ls"]),
    ("read 0<&3", ["read"]),
    ("ls >& 2", ["ls"]),
    ("ls >/dev/null", ["ls"]),
    ("ls 2>/dev/null", ["ls"]),
    ("ls > /dev/null", ["ls"]),
    ("ls 2> /dev/null", ["ls"]),
    ("ls >>/dev/null 2>>/dev/null", ["ls"]),
    ("ls >'/dev/null'", ["ls"]),
    ("ls a>/dev/null b", ["ls", "a", "b"]),
    ("2>/dev/null ls a", ["ls", "a"]),
    ("ls 10>&2", ["ls"]),
    ("echo \\2>/dev/null", ["echo", "2"]),
    ("echo '2'>/dev/null", ["echo", "2"]),
])
def test_harmless_redirections_keep_the_line_plain(line: str, words: list[str]) -> None:
    assert plain(line) == (tuple(words),)


def test_a_pipeline_with_harmless_redirections_is_plain() -> None:
    assert plain("make 2>&1 | grep error >/dev/null; echo done") == (
        ("make",), ("grep", "error"), ("echo", "done"))


@pytest.mark.parametrize("line", [
    "$(" * 200 + ")" * 200,
    "(" * 1000,
    ")" * 1000,
    "${" * 500,
    "`" * 1001,
    "\\`" * 60 + "`" * 61,
    '"$(' * 300,
    "<(" * 300,
    "$((" * 300,
    "$[" * 300 + "]" * 300,
    "'$(" * 300,
])
def test_deep_nesting_is_not_plain_and_never_raises(line: str) -> None:
    assert not split_commands(line).plain


def test_nesting_within_the_limit_is_scanned_and_beyond_it_is_refused() -> None:
    line = "echo " + "$(a; " * 40 + "rm x" + ")" * 40
    parsed = split_commands(line)
    assert ("rm", "x") in parsed.commands
    assert parsed.reason == "command substitution $(...)"
    assert parsed.complete
    deeper = split_commands("echo " + "$(a; " * 60 + "rm x" + ")" * 60)
    assert "nesting deeper than 50 levels" in deeper.reason and not deeper.complete


def test_the_reason_names_the_first_three_kinds_of_construct() -> None:
    parsed = split_commands("A=1 echo $(ls) $x $y > out # c")
    assert parsed.reason == "command substitution $(...), variable expansion $x, " \
                            "variable expansion $y"


@pytest.mark.parametrize("line", [
    "a " * 100_000,
    "a;" * 100_000,
    "'a' \"b\" " * 50_000,
    "$(a) " * 20_000,
    "`a` " * 20_000,
    "{" + "," * 200_000,
    "a[" * 100_000,
    "$'" + "\\x" * 100_000,
    "$((a)) ${b} " * 20_000,
    "x" * 500_000,
    "A=1 " * 100_000,
    "if " * 100_000,
])
def test_long_lines_take_linear_time(line: str) -> None:
    split_commands(line)


# Properties.

KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
            "esac", "function", "select", "time", "coproc", "!", "[[", "]]", "{", "}"}
SAFE = "abcxyzABCXYZ0123456789-._/=+,:@%^~*?[]"


def first_word(word: str) -> bool:
    return word not in KEYWORDS and "=" not in word


safe_words = st.text(SAFE, min_size=1, max_size=8)
safe_commands = st.tuples(safe_words.filter(first_word), st.lists(safe_words, max_size=3)).map(
    lambda parts: (parts[0], *parts[1])
)
"""1 to 4 words that cannot start anything: no keyword, no assignment, no quote."""


@given(safe_commands)
@example(("git", "status"))
@example(("pytest", "-x", "tests/a.py"))
@example(("ls", "*.py", "~/x", "[ab]?"))
def test_a_command_of_safe_words_is_plain(command: tuple[str, ...]) -> None:
    assert plain(" ".join(command)) == (command,)


EXTENSIONS = [
    lambda p, x: f"{p}; {x}",
    lambda p, x: f"{p} && {x}",
    lambda p, x: f"{p} || {x}",
    lambda p, x: f"{p} | {x}",
    lambda p, x: f"{p} & {x}",
    lambda p, x: f"{p}\n{x}",
    lambda p, x: f"{p} $({x})",
    lambda p, x: f"{p} `{x}`",
    lambda p, x: f"{p} <({x})",
    lambda p, x: f"{p}$({x})",
    lambda p, x: f"{p}`{x}`",
    lambda p, x: f'{p} "$({x})"',
    lambda p, x: f"{p} >({x})",
    lambda p, x: f"{p} ({x})",
    lambda p, x: f"{p};{x}",
    lambda p, x: f"{p}|{x}",
    lambda p, x: f"{p}&{x}",
    lambda p, x: f"{p} 2>&1 | {x}",
    lambda p, x: f"{p} >/dev/null && {x}",
    lambda p, x: f"{p} ${{y:-$({x})}}",
    lambda p, x: f"{p} $(( $({x}) ))",
]


@given(safe_commands, safe_commands, st.sampled_from(range(len(EXTENSIONS))))
@example(("git", "status"), ("rm", "-rf", "/"), 0)
def test_an_extension_never_hides_a_command(
        prefix: tuple[str, ...], extra: tuple[str, ...], which: int) -> None:
    parsed = split_commands(EXTENSIONS[which](" ".join(prefix), " ".join(extra)))
    assert extra in parsed.commands
    if parsed.plain:
        assert parsed.commands == (prefix, extra)


@given(st.lists(st.text(st.characters(exclude_characters="\0")), min_size=1, max_size=4)
       .filter(lambda words: words[0] not in KEYWORDS))
@example(["cmd", "a b", "it's", "$(rm x)", "`x`", "\n", "", "{a,b}", "#", "A=1", "~", "2>&1"])
@example(["A=1", "if"])
def test_words_quoted_by_shlex_come_back_unchanged(words: list[str]) -> None:
    line = " ".join(["'" + words[0].replace("'", "'\\''") + "'"]
                    + [shlex.quote(word) for word in words[1:]])
    assert plain(line) == (tuple(words),)


@given(st.text())
@example("")
@example("\\")
@example("$")
@example("\0$(\0)")
def test_arbitrary_text_never_raises(line: str) -> None:
    parsed = split_commands(line)
    assert (parsed.reason == "") == parsed.plain
    assert all(isinstance(word, str) for command in parsed.commands for word in command)
    assert all(command for command in parsed.commands)


shellish = st.text("ab \n\t;&|<>()$`'\"\\{},#=!*0123-/", max_size=40)


@given(shellish)
@settings(max_examples=500)
def test_shell_like_text_never_raises(line: str) -> None:
    parsed = split_commands(line)
    assert (parsed.reason == "") == parsed.plain


@pytest.mark.parametrize("line", ["aa &>/dev/null bb x", "aa &>>/dev/null bb x; cc"])
def test_a_line_bash_and_dash_split_apart_holds_what_either_runs(
        line: str, tmp_path: Path) -> None:
    """`aa &>/dev/null bb` is one command to bash and two to dash (`aa &`, then `bb`):
    never plain, and its commands are those of both, for the deny rules; among them,
    each that `/bin/sh` of this machine runs."""
    parsed = split_commands(line)
    assert not parsed.plain and "/bin/sh may read as & then >" in parsed.reason
    folder = tmp_path / "bin"
    folder.mkdir()
    ran = tmp_path / "ran"
    for name in ("aa", "bb", "cc"):
        (folder / name).write_text(f'#!/bin/sh\necho {name} "$@" >> {ran}\n')
        (folder / name).chmod(0o755)
    subprocess.run(["/bin/sh", "-c", line + "\nwait"], env={"PATH": str(folder)},
                   cwd=tmp_path, capture_output=True, timeout=20, check=False)
    for command in ran.read_text().splitlines():
        assert tuple(command.split()) in parsed.commands, (command, parsed.commands)
    assert ("bb", "x") in parsed.commands


@pytest.mark.parametrize("line", ["aa $(bb &>/dev/null cc)", "aa `bb &>x cc`"])
def test_substitutions_are_read_both_ways_too(line: str) -> None:
    assert {("bb", "cc"), ("bb",), ("cc",)} <= set(split_commands(line).commands)


# What bash runs.

BASH = shutil.which("bash")
HANDLER = """command_not_found_handle() {
    local record
    printf -v record '%s\\1' "$@"
    printf '%s\\2' "${record//$'\\n'/$'\\3'}" >> "$SHELLWORDS_OUT"
}
"""
"""Each command's record is one write (bash flushes at a newline), whole even when the commands
of a pipeline run together."""


def bash_runs(line: str, folder: Path) -> tuple[list[tuple[str, ...]], bool]:
    """The commands bash runs for `line` (none is on the PATH, so each one reaches the
    handler), and whether bash said nothing on stderr (no syntax error, no bad descriptor)."""
    for name in ("empty", "cwd"):
        (folder / name).mkdir(exist_ok=True)
    (folder / "handler.sh").write_text(HANDLER)
    descriptor, out = tempfile.mkstemp(dir=folder)
    os.close(descriptor)
    env = {"PATH": str(folder / "empty"), "BASH_ENV": str(folder / "handler.sh"),
           "SHELLWORDS_OUT": out, "HOME": "~", "LC_ALL": "C"}
    result = subprocess.run([BASH or "bash", "-c", line + "\nwait"], env=env,
                            cwd=folder / "cwd", capture_output=True, timeout=20, check=False)
    records = Path(out).read_bytes().replace(b"\3", b"\n").split(b"\2")[:-1]
    ran = [tuple(part.decode() for part in record.split(b"\1")[:-1]) for record in records]
    return ran, not result.stderr


PIECES = ["aa", "bb", "c", "'q r'", '"d e"', "\\", "\\\n", " ", " ", " ", "\t", ";", "\n",
          "&&", "||", "|", "&", "2>&1", ">/dev/null", "2> /dev/null", "$", '"$"', "#", "'",
          '"', "\\'", '\\"', "\\;", "x=1", "if", "{", "}", "(", ")", "*", "~", "[a]", "!",
          "\\$x", "''", "a\\ b", "2", ">&", "|&", "&>/dev/null", "1>&2", "\r", "\x0b"]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@given(line=st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join))
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(line="aa 'b c' \"d\\\"e\" f\\ g; bb | c && x 2>&1 >/dev/null")
@example(line="aa ~ * [a] ! 2 >&2")
@example(line="aa $\\\nbb")
def test_bash_runs_exactly_the_commands_of_a_plain_line(line: str, tmp_path: Path) -> None:
    assume(not re.search(r"~[0-9+-]", line))  # the directory stack: $PWD, $OLDPWD
    parsed = split_commands(line)
    if not parsed.plain:
        return
    ran, whole = bash_runs(line, tmp_path)
    left = list(parsed.commands)
    for command in ran:
        assert command in left, (line, ran, parsed.commands)
        left.remove(command)
    # bash runs them all, but the second of `a || b`, commands named by a path (run without
    # the handler) and those refused for a descriptor that is not open
    joined = line.replace("\\\n", "")
    if whole and "||" not in joined and not re.search(r"&\s*([3-9]|[0-9]{2})", joined):
        assert all("/" in command[0] for command in left), (line, ran, parsed.commands)


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_the_comparison_with_bash_sees_what_bash_runs(tmp_path: Path) -> None:
    ran, whole = bash_runs("aa 'b c'; dd 2>&1 | ee ~ *", tmp_path)
    assert sorted(ran) == [("aa", "b c"), ("dd",), ("ee", "~", "*")]
    assert whole
    assert bash_runs("aa; (", tmp_path)[1] is False
