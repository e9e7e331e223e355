"""Split a shell command line into its simple commands, for approval rules.

An allow rule names a command prefix (`git status`), so a line may be allowed only when it
is *plain*: simple commands of words, separators and harmless redirections, nothing through
which it could run or change more than its words say. Any other line is still split as well
as possible, for the deny rules. The scanner follows bash's quoting and tokenizing, not its
grammar: it never raises, and when unsure it says "not plain". Commands run through
`/bin/sh`, which may be bash or another shell (dash): where the two split a line apart
(`a &>/dev/null b` is one command to bash, `a &` and `>/dev/null b` to dash), the line is
not plain, and it holds the commands of both readings, for the deny rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ShellCommands", "split_commands"]

_MAX_DEPTH = 50
_BREAK = frozenset(" \t\n;&|()<>")
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done",
                       "case", "esac", "function", "select", "time", "coproc", "!", "[[", "]]",
                       "{", "}"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_DIGITS = re.compile(r"[0-9]+")
_FD_VARIABLE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
_REDIRECTIONS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">|", ">&", ">")
_TO_NULL = frozenset({">", ">>", ">|", ">&"})
_ANSI_C_BODY = re.compile(r"(?:[^'\\]|\\.)*", re.S)
_QUOTED = "\0"
"""Stands in the skeleton of a word for a character that was quoted or expanded."""


@dataclass(frozen=True)
class ShellCommands:
    """A command line as approval rules see it: its commands, and whether an allow rule may
    match it at all."""

    commands: tuple[tuple[str, ...], ...]
    """Every simple command of the line, as its words with quotes and escapes removed, in
    order; includes the commands found inside command/process substitutions and subshells
    (before the command that holds them, as they run first), so a deny rule can see them.
    Leading variable assignments (FOO=1) and shell keywords are dropped from the words."""
    plain: bool
    """True only when the line is a plain list of simple commands: nothing but words, the
    separators, and harmless redirections. An allow rule may match only a plain line."""
    reason: str
    """Why the line is not plain, in a few words for a person (the first three kinds of
    construct found, in order); "" when plain."""
    complete: bool = True
    """False when scanning stopped (nesting past the limit): commands may be missing, so
    not even a deny rule's silence says anything about the line."""


def split_commands(line: str) -> ShellCommands:
    """The simple commands of `line` and whether it is plain; never raises."""
    scanner = _Scanner(line, [], {})
    complete = scanner.scan()
    commands = scanner.commands
    if "&>" in line:  # read as dash does too: `&` ends a command there
        other = _Scanner(line, [], {}, bash=False)
        complete = other.scan() and complete
        commands += [command for command in other.commands if command not in commands]
    reasons = list(scanner.reasons)
    return ShellCommands(tuple(commands), not reasons, ", ".join(reasons[:3]), complete)


class _TooDeep(Exception):
    """Raised past the nesting limit, which keeps the recursion (and the time) bounded."""


class _Scanner:
    """One pass over a text; substitutions nest by recursion, backquoted ones in a new
    scanner over their unescaped text. All of them share the commands and the reasons (a dict
    for an ordered set)."""

    def __init__(self, text: str, commands: list[tuple[str, ...]],
                 reasons: dict[str, None], bash: bool = True) -> None:
        self.text, self.pos = text, 0
        self.commands, self.reasons = commands, reasons
        self.bash = bash
        """False: `&>` is `&` then `>`, as in dash."""

    def scan(self) -> bool:
        """Read the whole text; False when scanning stopped at the nesting limit."""
        try:
            self.parse_list(False, 0)
        except (_TooDeep, RecursionError):
            self.reasons = {f"nesting deeper than {_MAX_DEPTH} levels": None, **self.reasons}
            return False
        return True

    def flag(self, reason: str) -> None:
        self.reasons.setdefault(reason)

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def parse_list(self, nested: bool, depth: int) -> None:
        """Commands up to the end of the text, or when `nested` up to a `)` (consumed)."""
        if depth > _MAX_DEPTH:
            raise _TooDeep
        words: list[str] = []
        skeletons: list[str] = []
        while self.pos < len(self.text):
            char, two = self.peek(), self.text[self.pos : self.pos + 2]
            if char in " \t" or two == "\\\n":
                self.pos += 1 if char in " \t" else 2
            elif two in ("<(", ">("):
                self.add_word(words, skeletons, depth)
            elif char in "<>" or (two == "&>" and self.bash):
                self.redirect("", depth)
            elif char in "\n;&|":
                self.pos += 2 if two in ("&&", "||", "|&") else 1
                self.finish(words, skeletons)
            elif char == ")":
                self.pos += 1
                self.finish(words, skeletons)
                if nested:
                    return
                self.flag("unbalanced parenthesis )")
            elif char == "(":
                self.flag("subshell ( ... )")
                self.finish(words, skeletons)
                self.pos += 1
                self.parse_list(True, depth + 1)
            elif char == "#":
                self.flag("comment #")
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                self.add_word(words, skeletons, depth)
        self.finish(words, skeletons)
        if nested:
            self.flag("unbalanced parenthesis (")

    def add_word(self, words: list[str], skeletons: list[str], depth: int) -> None:
        """Read a word; digits (or {name}) right before a redirection are its file descriptor."""
        word = self.read_word(depth)
        if word is None:
            return
        value, skeleton = word
        fd = _DIGITS.fullmatch(skeleton) or _FD_VARIABLE.fullmatch(skeleton)
        if fd and self.peek() in ("<", ">") and self.peek(1) != "(":
            if skeleton[0] == "{":
                self.flag(f"redirection {value}{self.peek()}")
            self.redirect(value, depth)
            return
        braced = skeleton[skeleton.find("{") + 1 : skeleton.rfind("}")]
        if "{" in skeleton and ("," in braced or ".." in braced):
            self.flag(f"brace expansion {value}")
        words.append(value)
        skeletons.append(skeleton)

    def finish(self, words: list[str], skeletons: list[str]) -> None:
        """End a simple command: drop its leading assignments and keywords, keep the rest."""
        first = 0
        while first < len(words):
            if _ASSIGNMENT.match(skeletons[first]):
                self.flag(f"variable assignment {words[first].partition('=')[0]}=")
            elif words[first] in _KEYWORDS:
                self.flag(f"shell keyword {words[first]}")
            else:
                break
            first += 1
        if first < len(words):
            self.commands.append(tuple(words[first:]))
        words.clear()
        skeletons.clear()

    def redirect(self, fd: str, depth: int) -> None:
        """A redirection; only fd duplication and output to /dev/null keep the line plain."""
        op = next(op for op in _REDIRECTIONS if self.text.startswith(op, self.pos))
        self.pos += len(op)
        while self.peek() in (" ", "\t"):
            self.pos += 1
        word = self.read_word(depth) if self.peek() not in _BREAK or self.peek(1) == "(" else None
        value, skeleton = word or ("", "")
        harmless = ((op in ("<&", ">&") and _DIGITS.fullmatch(skeleton))
                    or (op in _TO_NULL and value == "/dev/null"))
        if op.startswith("<<"):
            self.flag("here-string <<<" if op == "<<<" else f"here-document {op}")
        elif op.startswith("&"):
            self.flag(f"redirection {op}, which /bin/sh may read as & then >")
        elif not harmless:
            self.flag(f"redirection {fd}{op}")

    def read_word(self, depth: int) -> tuple[str, str] | None:
        """A word's value and its skeleton: the value with each quoted or expanded character
        replaced, so that `'A=1'` is not an assignment nor `\\2>` a file descriptor."""
        value: list[str] = []
        skeleton: list[str] = []
        started = False
        while self.pos < len(self.text):
            char, start, literal = self.peek(), self.pos, False
            if char in "<>" and self.peek(1) == "(":
                self.flag(f"process substitution {char}(...)")
                self.pos += 2
                self.parse_list(True, depth + 1)
                part = self.text[start : self.pos]
            elif char in _BREAK:
                break
            elif char == "\\":
                self.pos += 2
                if self.pos > len(self.text):
                    self.flag("trailing backslash")
                    continue
                if self.text[start + 1] == "\n":
                    continue
                part = self.text[start + 1]
            elif char == "'":
                end = self.text.find("'", start + 1)
                if end < 0:
                    self.flag("unbalanced quote")
                    end = len(self.text)
                part, self.pos = self.text[start + 1 : end], end + 1
            elif char == '"':
                part = self.double_quoted(depth)
            elif char == "$":
                part = self.dollar(depth, quoted=False)
            elif char == "`":
                part = self.backquoted(depth, quoted=False)
            else:
                part, literal = char, True
                self.pos += 1
            started = True
            value.append(part)
            skeleton.append(part if literal else _QUOTED * max(1, len(part)))
        return ("".join(value), "".join(skeleton)) if started else None

    def double_quoted(self, depth: int) -> str:
        """The value of "...": only $ and backquotes are active (and make the line not plain)."""
        self.pos += 1
        value: list[str] = []
        while self.pos < len(self.text):
            char = self.peek()
            if char == '"':
                self.pos += 1
                return "".join(value)
            if char == "\\" and self.peek(1) in ('"', "\\", "$", "`", "\n"):
                value.append("" if self.peek(1) == "\n" else self.peek(1))
                self.pos += 2
            elif char == "$":
                value.append(self.dollar(depth, quoted=True))
            elif char == "`":
                value.append(self.backquoted(depth, quoted=True))
            else:
                value.append(char)
                self.pos += 1
        self.flag("unbalanced quote")
        return "".join(value)

    def dollar(self, depth: int, quoted: bool) -> str:
        """A `$` construct: its source text (a lone `$` is literal), or a $'...' value."""
        start, after = self.pos, self.peek(1)
        name = _NAME.match(self.text, start + 1)
        if after == "(":
            arithmetic = self.text.startswith("$((", start)
            self.flag("arithmetic $((...))" if arithmetic else "command substitution $(...)")
            self.pos += 2
            self.parse_list(True, depth + 1)
        elif after in ("{", "["):
            self.flag("parameter expansion ${...}" if after == "{" else "arithmetic $[...]")
            self.pos += 1
            self.skip_group(after, "}" if after == "{" else "]", depth + 1)
        elif after == "'" and not quoted:
            self.flag("ANSI-C quoting $'...'")
            body = _ANSI_C_BODY.match(self.text, start + 2)
            end = body.end() if body else start + 2
            if self.text[end : end + 1] != "'":
                self.flag("unbalanced quote")
            self.pos = end + 1
            return self.text[start + 2 : end]
        elif after == '"' and not quoted:
            self.flag('locale quoting $"..."')
            self.pos += 1
            return self.double_quoted(depth)
        elif after == "\\" and self.peek(2) == "\n":
            self.flag("line continuation after $")
            self.pos += 1
        elif name or (after and after in "0123456789@*#?$!-"):
            self.pos = name.end() if name else start + 2
            self.flag(f"variable expansion {self.text[start : self.pos]}")
        else:
            self.pos += 1
        return self.text[start : self.pos]

    def skip_group(self, opener: str, closer: str, depth: int) -> None:
        """Skip a balanced ${...} or $[...], scanning the substitutions inside it."""
        if depth > _MAX_DEPTH:
            raise _TooDeep
        level = 0
        while self.pos < len(self.text):
            char = self.peek()
            if char == "\\":
                self.pos += 2
            elif char == "'":
                end = self.text.find("'", self.pos + 1)
                self.pos = len(self.text) if end < 0 else end + 1
            elif char == '"':
                self.double_quoted(depth)
            elif char == "$":
                self.dollar(depth, quoted=False)
            elif char == "`":
                self.backquoted(depth, quoted=False)
            else:
                self.pos += 1
                level += (char == opener) - (char == closer)
                if level == 0:
                    return
        self.flag(f"unbalanced {opener}")

    def backquoted(self, depth: int, quoted: bool) -> str:
        """`...`: its text, unescaped as bash does, is scanned as a line of its own."""
        start = self.pos
        self.pos += 1
        inner: list[str] = []
        escapes = "$`\\" + ('"' if quoted else "")
        while self.pos < len(self.text) and self.peek() != "`":
            if self.peek() == "\\" and self.peek(1):
                escaped = self.peek(1)
                inner.append(escaped if escaped in escapes else "\\" + escaped)
                self.pos += 2
            else:
                inner.append(self.peek())
                self.pos += 1
        if self.pos >= len(self.text):
            self.flag("unbalanced backquote")
        self.flag("command substitution `...`")
        self.pos += 1
        _Scanner("".join(inner), self.commands, self.reasons, self.bash).parse_list(
            False, depth + 1)
        return self.text[start : min(self.pos, len(self.text))]
