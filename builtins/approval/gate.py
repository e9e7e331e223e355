"""The approval gate: the builtin `before_tool_call`, which lets a call run, denies it, or
asks a person, by the rules and the turn's approval policy; and records each decision.

| Policy | no rule: reads | no rule: writes, runs | allow | ask | deny | escalation |
|---|---|---|---|---|---|---|
| `ask` | runs | asks | runs | asks | denied | asks |
| `on-request` | runs | runs (sandboxed) | runs | asks | denied | asks |
| `never` | runs | runs (sandboxed) | runs | denied | denied | denied |
| `auto` | runs | runs (sandboxed) | runs | runs | denied | denied |

A question nobody can answer (no asker in the state) is a denial, so `never` is what any
policy becomes without a terminal. An answer "always" is kept for the session, in memory,
except for a command that leaves the sandbox: each of those is asked.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from hookline.kernel.interception import ToolCall, ToolCallDecision, ToolCallResult
from hookline.kernel.turn import RUNTIME_ENVIRONMENT, RUNTIME_TAPE, RUNTIME_WORKSPACE

from ..host.tools import ESCALATION_GRANT, failed_command
from .question import APPROVAL_ASKER, APPROVAL_POLICY, APPROVAL_RECORD, Answer, Question
from .rules import RuleError, RuleSet, Verdict, load_rules, tool_key, workspace_paths

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["READ_ONLY_TOOLS", "ApprovalGate"]

logger = logging.getLogger(__name__)

READ_ONLY_TOOLS = frozenset({"fs_read", "shell_output", "tape_info", "tape_search",
                             "tape_handoff", "spill_read"})
"""Tools that change nothing on the machine: no policy asks about them."""

MAX_SESSIONS = 256
"""Sessions whose "always" answers are kept; the oldest is forgotten first."""
MAX_APPROVED = 256
""""Always" answers kept per session."""

Need = Literal["run", "ask", "deny"]


@dataclass(frozen=True)
class Judgement:
    """What the rules and the policy make of one call, before anyone is asked."""

    need: Need
    reason: str
    verdict: Verdict
    escalate: str | None = None


class ApprovalGate:
    """One per builtin plugin; `settings()` gives the current settings."""

    def __init__(self, settings: Callable[[], Settings], workspace: Callable[[], str]) -> None:
        self._settings = settings
        self._workspace = workspace
        self._approved: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        self._failed: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._rules: tuple[tuple[Any, ...], RuleSet] | None = None
        self._warned: set[str] = set()

    # -- the hook ----------------------------------------------------------------------

    async def before_tool_call(self, call: ToolCall, state: dict[str, Any]
                               ) -> ToolCallDecision | None:
        settings = self._settings()
        workspace = str(state.get(RUNTIME_WORKSPACE) or self._workspace())
        policy = str(state.get(APPROVAL_POLICY) or settings.approval)
        session_id = str(state.get("session_id") or "")
        judgement = self.judge(call.tool, call.arguments, policy, settings, workspace)
        record: dict[str, Any] = {"tool": call.tool, "arguments": _shown(call.arguments),
                                  "policy": policy, "rule": _where(judgement.verdict)}
        if judgement.escalate:
            record["escalate"] = judgement.escalate
            record["justification"] = str(call.arguments.get("justification") or "")
        decision: ToolCallDecision | None
        if judgement.need == "run":
            record.update(decision="allowed", by="rule" if judgement.verdict.rule else "policy")
            decision = self._grant(call, call.arguments, state, judgement)
        elif judgement.need == "deny":
            record.update(decision="denied", by="rule" if judgement.verdict.rule else "policy",
                          message=judgement.reason)
            decision = ToolCallDecision.deny(judgement.reason)
        else:
            decision = await self._ask(call, state, session_id, workspace, judgement, record)
        state[APPROVAL_RECORD] = {"run_id": call.run_id, **record}
        tape = state.get(RUNTIME_TAPE)
        # What a rule or a person decided, and every denial, is kept; a call the policy
        # simply let run is not (its tool_result says it ran).
        if tape is not None and (record["decision"] != "allowed" or record["by"] == "rule"):
            await tape.append_event("approval", record, run_id=call.run_id)
        return decision

    def note_result(self, call: ToolCall, result: ToolCallResult, state: dict[str, Any]) -> None:
        """Keep the session's last shell command that ran in the sandbox and failed: an
        escalation of it shows why. A call that never ran (refused arguments, denied) is
        not a failure of the sandbox's."""
        if tool_key(call.tool) != "shell" or call.arguments.get("escalate"):
            return
        if result.error is not None or not failed_command(result.result):
            return
        text = str(result.result)
        session_id = str(state.get("session_id") or "")
        tail = "\n".join(text.strip().splitlines()[-6:])
        self._failed[session_id] = (str(call.arguments.get("command") or ""), tail)
        self._failed.move_to_end(session_id)
        while len(self._failed) > MAX_SESSIONS:
            self._failed.popitem(last=False)

    # -- judging -----------------------------------------------------------------------

    def rules(self, settings: Settings, workspace: str) -> RuleSet:
        """The rules for this workspace, read again when a rules file changed."""
        import os

        from ..config.table import CONFIG_NAME
        from .rules import RULES_TABLE, TRUST_FILE, WORKSPACE_RULES

        def stamp(path: str) -> tuple[int, int]:
            try:
                info = os.stat(path)
            except OSError:
                return (0, 0)
            return (info.st_mtime_ns, info.st_size)

        key = (id(settings), workspace, stamp(os.path.join(workspace, WORKSPACE_RULES)),
               stamp(str(settings.home / TRUST_FILE)))
        if self._rules is None or self._rules[0] != key:
            rules = load_rules(settings.extra.get(RULES_TABLE), settings.home / CONFIG_NAME,
                               workspace, settings.home)
            for line in rules.ignored:
                if line not in self._warned:
                    self._warned.add(line)
                    logger.warning("%s", line)
            self._rules = (key, rules)
        return self._rules[1]

    def judge(self, tool: str, arguments: dict[str, Any], policy: str, settings: Settings,
              workspace: str) -> Judgement:
        """What happens to a call before anyone is asked (`hookline rules check` too)."""
        name = tool_key(tool)
        try:
            verdict = self.rules(settings, workspace).judge(name, arguments, workspace)
        except RuleError as exc:
            verdict = Verdict(None, None, "")
            if name not in READ_ONLY_TOOLS:
                return Judgement("deny", f"the approval rules cannot be read ({exc}); nothing "
                                         f"that writes or runs is allowed until they are fixed",
                                 verdict)
        escalate = _escalation(name, arguments, settings)
        if verdict.action == "deny":
            said = f" ({verdict.rule.reason})" if verdict.rule and verdict.rule.reason else ""
            return Judgement("deny", f"denied by a rule{said}: {verdict.detail}", verdict,
                             escalate)
        if escalate:
            if policy in ("never", "auto"):
                return Judgement("deny", f"escalation ({escalate}) needs a person's approval, "
                                         f"and the approval policy is {policy}: the command "
                                         f"was not run; do the work inside the sandbox or ask "
                                         f"the user to run it", verdict, escalate)
            return Judgement("ask", _escalation_reason(escalate), verdict, escalate)
        if verdict.action == "allow":
            return Judgement("run", verdict.detail, verdict)
        if verdict.action == "ask":
            if policy == "auto":
                return Judgement("run", "approval = auto runs what an ask rule names", verdict)
            if policy == "never":
                return Judgement("deny", f"{verdict.detail}, and the approval policy is never: "
                                         f"the call was not run", verdict)
            return Judgement("ask", verdict.detail, verdict)
        if policy == "ask" and name not in READ_ONLY_TOOLS:
            return Judgement("ask", f"{verdict.detail}, and approval = ask asks before every "
                                    f"tool that writes or runs", verdict)
        return Judgement("run", f"{verdict.detail}; approval = {policy} runs it", verdict)

    # -- asking ------------------------------------------------------------------------

    async def _ask(self, call: ToolCall, state: dict[str, Any], session_id: str,
                   workspace: str, judgement: Judgement, record: dict[str, Any]
                   ) -> ToolCallDecision | None:
        key = _session_key(call.tool, call.arguments, workspace)
        if key in self._approved.get(session_id, ()):
            record.update(decision="approved", by="session")
            return self._grant(call, call.arguments, state, judgement)
        asked_about, shown_state = _looked_at(call.arguments, workspace)
        question, problem = await self._question(call, session_id, workspace, judgement,
                                                 state.get(RUNTIME_ENVIRONMENT))
        if problem is not None:  # a diff that would never apply is not asked about
            return _denied(record, "gate", (
                f"this edit cannot apply to the file as it is: {problem}. It was not asked "
                f"about: read the file and send an edit whose 'old' text occurs exactly once "
                f"(or set replace_all)"))
        record["question"] = question.summary
        asker = state.get(APPROVAL_ASKER)
        if asker is None:
            return _denied(record, "nobody", (
                f"this call needs a person's approval ({judgement.reason}), and nobody can "
                f"answer here (no terminal, or a request that does not take questions): it "
                f"was not run. Tell the user what you wanted to run and why"))
        try:
            answer = await asker.ask(question)
        except Exception as exc:  # a broken asker denies, never runs
            logger.warning("approval.asker_failed asker=%s error=%s: %s",
                           type(asker).__name__, type(exc).__name__, exc)
            answer = Answer("deny", f"the question could not be asked ({type(exc).__name__})",
                            by="nobody")
        if answer.decision == "approve_session" and not question.always_allowed:
            answer = replace(answer, decision="approve")  # whoever offered "always" anyway
            record["note"] = "approved once: a command that leaves the sandbox is asked each time"
        record.update(decision={"approve": "approved", "approve_session": "approved_session",
                                "deny": "denied"}[answer.decision], by=answer.by)
        if answer.message:
            record["message"] = answer.message
        if answer.decision == "deny":
            said = f": {answer.message}" if answer.message else ""
            return ToolCallDecision.deny(f"the user denied this call{said}. Do not retry it "
                                         f"unchanged")
        now, state_now = _looked_at(call.arguments, workspace)
        changed = None
        if now != asked_about:  # a command made the path a link while the question waited
            changed = f"it now leads to {now[-1]!r}"
        elif state_now != shown_state:  # the file shown in the diff was written meanwhile
            changed = "another program wrote to it, so the diff shown is not what would happen"
        if changed is not None:
            return _denied(record, "gate", (
                f"{call.arguments.get('path')!r} changed while the question waited ({changed}): "
                f"the approval was for what was shown, so the call was not run; ask again"))
        arguments = call.arguments
        if answer.command is not None and tool_key(call.tool) == "shell":
            arguments = {**arguments, "command": answer.command}
            record["edited_command"] = answer.command
        if answer.decision == "approve_session":
            self._remember(session_id, _session_key(call.tool, arguments, workspace))
        return self._grant(call, arguments, state, judgement)

    async def _question(self, call: ToolCall, session_id: str, workspace: str,
                        judgement: Judgement, environment: object = None
                        ) -> tuple[Question, str | None]:
        """The question to ask, and, for an edit that cannot apply to the file as it is,
        why (`proposed_change`): that one is not asked."""
        name = tool_key(call.tool)
        arguments = call.arguments
        reason = judgement.reason
        diff: tuple[str, ...] = ()
        problem = None
        if name == "shell":
            command = str(arguments.get("command") or "")
            summary = command
            failed = self._failed.get(session_id)
            if judgement.escalate and failed and failed[0] == command:
                reason += f". In the sandbox it failed:\n{failed[1]}"
        elif name in ("fs_write", "fs_edit"):
            summary = f"{'write' if name == 'fs_write' else 'edit'} {arguments.get('path')!r}"
            paths = _reached(arguments, workspace)
            if len(paths) > 1:  # what is written is the file the link leads to
                summary += f" (a link to {paths[1]!r})"
            import anyio.to_thread

            from ..terminal.tool_view import proposed_change

            change, problem = await anyio.to_thread.run_sync(proposed_change, workspace, name,
                                                             arguments, environment)
            diff = tuple(change)
        else:
            summary = _arguments_summary(arguments)
        return Question(uuid.uuid4().hex[:12], session_id, call.tool, dict(arguments), summary,
                        reason, str(arguments.get("justification") or ""), judgement.escalate,
                        diff), problem

    def _remember(self, session_id: str, key: str) -> None:
        approved = self._approved.setdefault(session_id, OrderedDict())
        self._approved.move_to_end(session_id)
        approved[key] = None
        while len(approved) > MAX_APPROVED:
            approved.popitem(last=False)
        while len(self._approved) > MAX_SESSIONS:
            self._approved.popitem(last=False)

    @staticmethod
    def _grant(call: ToolCall, arguments: dict[str, Any], state: dict[str, Any],
               judgement: Judgement) -> ToolCallDecision | None:
        """Proceed; an approved escalation leaves the one-shot grant the shell tool needs."""
        if judgement.escalate:
            state[ESCALATION_GRANT] = (str(arguments.get("command") or ""), judgement.escalate)
        if arguments is not call.arguments:
            return ToolCallDecision.proceed(dict(arguments))
        return None


MAX_ARGUMENT_SHOWN = 400
"""Characters of one argument a question shows (the rest counted)."""
MAX_RECORDED = 200
"""Characters of one text argument the approval record keeps."""


def _arguments_summary(arguments: dict[str, Any]) -> str:
    """Every argument of a call, as JSON, each cut on its own: a long first argument must
    not hide the next."""
    import json

    parts = [f"{key} = {_cut(json.dumps(value, ensure_ascii=False), MAX_ARGUMENT_SHOWN)}"
             for key, value in arguments.items()]
    return "; ".join(parts) or "(no arguments)"


def _cut(text: str, keep: int) -> str:
    """`text` cut after `keep` characters, with what was left out counted."""
    if len(text) <= keep:
        return text
    return f"{text[:keep]}... [{len(text) - keep:,} more characters]"


def _escalation(name: str, arguments: dict[str, Any], settings: Settings) -> str | None:
    """The escalation a shell call asks for, when the sandbox would refuse it: none with
    the sandbox off, and no network escalation when the network is open anyway."""
    escalate = arguments.get("escalate") if name == "shell" else None
    if not escalate or settings.sandbox == "off":
        return None
    if escalate == "network" and settings.sandbox_network:
        return None
    return str(escalate)


def _escalation_reason(escalate: str) -> str:
    if escalate == "network":
        return ("the sandbox closes the network (sandbox_network = false); approved, this "
                "one command runs in the sandbox with the network open")
    return ("approved, this one command runs OUTSIDE the sandbox, with your full rights: "
            "every file you can change, the network, your other processes")


def _session_key(tool: str, arguments: dict[str, Any], workspace: str) -> str:
    name = tool_key(tool)
    if name == "shell":  # in the background it runs on, a thing of its own to approve
        return (f"shell\0{arguments.get('command')}\0{arguments.get('escalate') or ''}"
                f"\0{bool(arguments.get('background'))}")
    reached = _reached(arguments, workspace)
    if reached:  # the file reached: another link to it is the same file
        return f"{name}\0{reached[-1]}"
    if "path" in arguments:
        return f"{name}\0{arguments['path']}"
    return name


def _denied(record: dict[str, Any], by: str, message: str) -> ToolCallDecision:
    """A call refused before or instead of its question, recorded as such."""
    record.update(decision="denied", by=by, message=message)
    return ToolCallDecision.deny(message)


def _looked_at(arguments: dict[str, Any], workspace: str
               ) -> tuple[tuple[str, ...], tuple[int, int, int] | None]:
    """A file tool's path as reached, and its file's state (inode, size, modification
    time; None when there is none): what a question shows, which must hold still when
    the question is answered."""
    paths = _reached(arguments, workspace)
    try:
        info = os.stat(os.path.join(workspace, paths[-1])) if paths else None
    except OSError:
        info = None
    return paths, None if info is None else (info.st_ino, info.st_size, info.st_mtime_ns)


def _reached(arguments: dict[str, Any], workspace: str) -> tuple[str, ...]:
    """A file tool's path as given and as reached (`workspace_paths`); () for others."""
    path = arguments.get("path")
    return workspace_paths(path, workspace) if isinstance(path, str) else ()


def _where(verdict: Verdict) -> str | None:
    return verdict.rule.where if verdict.rule is not None else None


def _shown(arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments as the record keeps them: long texts (a file's content) cut short."""
    return {key: _cut(value, MAX_RECORDED) if isinstance(value, str) else value
            for key, value in arguments.items()}
