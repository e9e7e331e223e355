"""The approval gate through real turns of the builtin agent on a scripted model: each
policy, the rules, a plugin's own asker (put in the state by its `load_state`), answers
remembered for the session, an edited command, escalation grants, and what the tape keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin, model_of

from hookline.builtins.approval import APPROVAL_ASKER, Answer, Question
from hookline.builtins.tape import Tape, session_tape_name
from hookline.kernel import hookimpl

pytestmark = pytest.mark.anyio

SESSION = "approvals:chat"


def shell(command: str, **extra: Any) -> dict[str, Any]:
    return {"name": "shell", "arguments": {"command": command, **extra}}


class Deskbot:
    """A plugin that asks in its own way: its answers, in order; the questions it got."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.questions: list[Question] = []

    async def ask(self, question: Question) -> Answer:
        self.questions.append(question)
        return self.answers.pop(0)

    @hookimpl
    def load_state(self) -> dict[str, Any]:
        return {APPROVAL_ASKER: self}


async def turn(workspace: Path, turns: list[dict[str, Any]], *plugins: object,
               rules: list[dict[str, Any]] | None = None, **settings: Any
               ) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]], Any]:
    """One turn: its result, its tool_result records, its approval events, the model."""
    extra = {"rules": rules} if rules is not None else {}
    framework, builtin = build_builtin(workspace, turns, *plugins, extra=extra, **settings)
    async with framework.running():
        result = await framework.process_inbound({"content": "go", "session_id": SESSION})
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    records = [record for entry in entries if entry.kind == "tool_result"
               for record in entry.payload["results"]]
    events = [entry.payload["data"] for entry in entries
              if entry.kind == "event" and entry.payload["name"] == "approval"]
    return result, records, events, model_of(builtin)


def told_model(model: Any, index: int = 1) -> str:
    """What the model's request `index` said of the tool's result."""
    (message,) = [m for m in model.calls[index].messages if m.role == "tool"][-1:]
    return str(message.content)


async def test_on_request_runs_sandboxed_work_and_an_ask_rule_without_an_asker_is_denied(
        workspace: Path) -> None:
    rules = [{"action": "ask", "tool": "shell", "command": "touch"}]
    _result, records, events, model = await turn(
        workspace, [{"tool_calls": [shell("echo hi > a.txt"), shell("touch b.txt")]},
                    {"text": "done"}], rules=rules)
    assert [r["outcome"] for r in records] == ["ran", "denied"]
    assert (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    assert "nobody can answer here" in records[1]["error"]
    assert "nobody can answer here" in told_model(model)
    (event,) = events
    assert event["decision"] == "denied" and event["by"] == "nobody"
    assert event["rule"].endswith("config.toml rule 1") and event["policy"] == "on-request"


async def test_ask_asks_before_writes_and_runs_and_never_before_reads(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("old\n")
    bot = Deskbot(Answer("approve"), Answer("deny", "not that file"))
    _result, records, events, model = await turn(
        workspace, [{"tool_calls": [
            {"name": "fs_read", "arguments": {"path": "notes.txt"}},
            {"name": "fs_edit", "arguments": {"path": "notes.txt", "old": "old", "new": "new"}},
            shell("rm notes.txt")]}, {"text": "done"}], bot, approval="ask")
    assert [r["outcome"] for r in records] == ["ran", "ran", "denied"]
    assert (workspace / "notes.txt").read_text() == "new\n"
    edit, remove = bot.questions
    assert edit.summary == "edit 'notes.txt'" and "-old" in edit.diff and "+new" in edit.diff
    assert remove.summary == "rm notes.txt" and "approval = ask" in remove.reason
    assert "the user denied this call: not that file" in records[2]["error"]
    assert "not that file" in told_model(model)
    assert [(e["tool"], e["decision"], e["by"]) for e in events] == [
        ("fs_edit", "approved", "user"), ("shell", "denied", "user")]


async def test_never_denies_what_would_ask_and_auto_runs_it(workspace: Path) -> None:
    rules = [{"action": "ask", "tool": "fs_write"}]
    write = {"name": "fs_write", "arguments": {"path": "a.txt", "content": "x"}}
    _r, records, _e, _m = await turn(workspace, [{"tool_calls": [write]}, {"text": "ok"}],
                                     Deskbot(), rules=rules, approval="never")
    assert records[0]["outcome"] == "denied" and "approval policy is never" in records[0]["error"]
    _r, records, _e, _m = await turn(workspace, [{"tool_calls": [write]}, {"text": "ok"}],
                                     rules=rules, approval="auto")
    assert records[-1]["outcome"] == "ran" and (workspace / "a.txt").read_text() == "x"


async def test_deny_beats_allow_and_an_allow_rule_is_not_a_question(workspace: Path) -> None:
    rules = [{"action": "allow", "tool": "shell", "command": "echo"},
             {"action": "deny", "tool": "shell", "command": "rm", "reason": "no deleting"}]
    bot = Deskbot()
    _r, records, events, _m = await turn(
        workspace, [{"tool_calls": [shell("echo a"), shell("echo b && rm -rf x")]},
                    {"text": "ok"}], bot, rules=rules, approval="ask")
    assert [r["outcome"] for r in records] == ["ran", "denied"]
    assert "no deleting" in records[1]["error"] and bot.questions == []
    assert [(e["decision"], e["by"]) for e in events] == [("allowed", "rule"), ("denied", "rule")]


async def test_always_is_remembered_for_the_session_for_that_command_only(
        workspace: Path) -> None:
    bot = Deskbot(Answer("approve_session"), Answer("deny"))
    _r, records, events, _m = await turn(
        workspace, [{"tool_calls": [shell("echo one"), shell("echo one"), shell("echo two")]},
                    {"text": "ok"}], bot, approval="ask")
    assert [r["outcome"] for r in records] == ["ran", "ran", "denied"]
    assert [q.summary for q in bot.questions] == ["echo one", "echo two"]
    assert [e["by"] for e in events] == ["user", "session", "user"]


async def test_a_write_through_a_link_names_the_file_and_always_means_that_file(
        workspace: Path) -> None:
    """A repository's link `docs/notes.md -> ../Makefile`: the question says the write lands
    in Makefile, and "always" for it covers Makefile under either name, nothing else."""
    (workspace / "Makefile").write_text("all:\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "notes.md").symlink_to("../Makefile")
    (workspace / "docs" / "other.md").write_text("x\n")

    def write(path: str) -> dict[str, Any]:
        return {"name": "fs_write", "arguments": {"path": path, "content": "y\n"}}

    bot = Deskbot(Answer("approve_session"), Answer("deny"))
    _r, records, _events, _m = await turn(
        workspace, [{"tool_calls": [write("docs/notes.md"), write("Makefile"),
                                    write("docs/other.md")]}, {"text": "ok"}],
        bot, approval="ask")
    assert [q.summary for q in bot.questions] == [
        "write 'docs/notes.md' (a link to 'Makefile')", "write 'docs/other.md'"]
    assert [r["outcome"] for r in records] == ["ran", "ran", "denied"]


class SwappingDeskbot(Deskbot):
    """Answers yes, but while its question waits a command turns the file into a link."""

    def __init__(self, workspace: Path) -> None:
        super().__init__(Answer("approve"))
        self.workspace = workspace

    async def ask(self, question: Question) -> Answer:
        (self.workspace / "docs" / "notes.md").unlink()
        (self.workspace / "docs" / "notes.md").symlink_to("../Makefile")
        return await super().ask(question)


async def test_a_path_swapped_for_a_link_while_its_question_waits_is_not_written(
        workspace: Path) -> None:
    (workspace / "Makefile").write_text("all:\n")
    (workspace / "docs").mkdir()
    (workspace / "docs" / "notes.md").write_text("notes\n")
    bot = SwappingDeskbot(workspace)
    call = {"name": "fs_write", "arguments": {"path": "docs/notes.md", "content": "pwned\n"}}
    _r, records, events, _m = await turn(workspace, [{"tool_calls": [call]}, {"text": "ok"}],
                                         bot, approval="ask")
    assert [q.summary for q in bot.questions] == ["write 'docs/notes.md'"]
    assert records[0]["outcome"] == "denied"
    assert "changed while the question waited (it now leads to 'Makefile')" in (
        records[0]["error"])
    assert (workspace / "Makefile").read_text() == "all:\n"
    assert events[0]["decision"] == "denied" and events[0]["by"] == "gate"


class AppendingDeskbot(Deskbot):
    """Answers yes, but while its question waits the user appends a line to the file."""

    def __init__(self, path: Path) -> None:
        super().__init__(Answer("approve"))
        self.path = path

    async def ask(self, question: Question) -> Answer:
        with self.path.open("a") as file:
            file.write("a line written meanwhile\n")
        return await super().ask(question)


async def test_a_file_written_while_its_question_waits_is_not_overwritten(
        workspace: Path) -> None:
    """The diff asked about is no longer what would happen: nothing is written, the
    user's line is kept."""
    (workspace / "notes.md").write_text("original\n")
    bot = AppendingDeskbot(workspace / "notes.md")
    call = {"name": "fs_write", "arguments": {"path": "notes.md", "content": "model\n"}}
    _r, records, events, _m = await turn(workspace, [{"tool_calls": [call]}, {"text": "ok"}],
                                         bot, approval="ask")
    assert records[0]["outcome"] == "denied"
    assert "changed while the question waited (another program wrote to it" in (
        records[0]["error"])
    assert (workspace / "notes.md").read_text() == "original\na line written meanwhile\n"
    assert events[0]["decision"] == "denied" and events[0]["by"] == "gate"


async def test_an_edited_command_runs_instead_and_the_record_says_so(workspace: Path) -> None:
    bot = Deskbot(Answer("approve", command="echo safer > out.txt"))
    _r, records, events, _m = await turn(
        workspace, [{"tool_calls": [shell("echo risky > out.txt")]}, {"text": "ok"}],
        bot, approval="ask")
    assert (workspace / "out.txt").read_text() == "safer\n"
    assert records[0]["arguments"]["command"] == "echo safer > out.txt"
    assert records[0]["requested_arguments"]["command"] == "echo risky > out.txt"
    assert events[0]["edited_command"] == "echo safer > out.txt"


async def test_a_broken_asker_denies(workspace: Path) -> None:
    class Broken(Deskbot):
        async def ask(self, question: Question) -> Answer:
            raise RuntimeError("notification service down")

    _r, records, _e, _m = await turn(workspace, [{"tool_calls": [shell("echo x > y")]},
                                                 {"text": "ok"}], Broken(), approval="ask")
    assert records[0]["outcome"] == "denied" and not (workspace / "y").exists()


async def test_an_escalation_asks_once_and_without_a_grant_the_tool_refuses(
        workspace: Path) -> None:
    bot = Deskbot(Answer("approve", "go ahead"))
    net = shell("echo $0", escalate="network", justification="needs the index")
    _r, records, events, _m = await turn(workspace, [{"tool_calls": [net]}, {"text": "ok"}],
                                         bot)
    (question,) = bot.questions
    assert question.escalate == "network" and question.justification == "needs the index"
    assert "closes the network" in question.reason
    assert records[0]["outcome"] == "ran", records[0]
    assert events[0]["escalate"] == "network" and events[0]["decision"] == "approved"

    for policy in ("never", "auto"):
        _r, records, _e, _m = await turn(workspace, [{"tool_calls": [net]}, {"text": "ok"}],
                                         approval=policy)
        assert records[-1]["outcome"] == "denied"
        assert f"the approval policy is {policy}" in records[-1]["error"]


async def test_a_command_that_leaves_the_sandbox_is_asked_each_time(workspace: Path) -> None:
    """"Always" is not offered for an unsandboxed escalation, and taken as once if an
    asker sends it anyway: the sandboxed commands after it could change what it runs
    (here its script) and have it run again, unasked, with the user's rights."""
    bot = Deskbot(Answer("approve_session"), Answer("deny", "not after that edit"))
    outside = shell("sh build.sh", escalate="unsandboxed", justification="writes ~/.cache")
    (workspace / "build.sh").write_text("echo built\n")
    _r, records, events, _m = await turn(
        workspace, [{"tool_calls": [outside, shell("echo 'echo owned' > build.sh"), outside]},
                    {"text": "ok"}], bot, approval="on-request")
    assert [r["outcome"] for r in records] == ["ran", "ran", "denied"]
    assert [q.summary for q in bot.questions] == ["sh build.sh", "sh build.sh"]
    question = bot.questions[0]
    assert not question.always_allowed and question.prompt == "approve? [y/n/e] "
    assert "a = always" not in question.answer_keys
    assert events[0]["decision"] == "approved" and "asked each time" in events[0]["note"]
    network = shell("pip download x", escalate="network", justification="the index")
    bot = Deskbot(Answer("approve_session"))
    _r, records, _e, _m = await turn(
        workspace, [{"tool_calls": [network, network]}, {"text": "ok"}], bot)
    assert len(bot.questions) == 1 and bot.questions[0].prompt == "approve? [y/n/a/e] "


HEARTBEAT = "while :; do date +%s%N > {name}; sleep 0.05; done"
STILL_BEATING = ("a=$(cat {name}); sleep 0.6; b=$(cat {name}); "
                 "[ \"$a\" = \"$b\" ] && echo {name} stopped || echo {name} beats")


async def test_what_an_approved_command_leaves_running_ends_with_it(workspace: Path) -> None:
    """A daemon an approved command left would keep the network open for the sandboxed
    commands after it (they reach it through the workspace): it ends with that command. A
    background command approved as such runs on."""
    daemon = f"setsid sh -c '{HEARTBEAT.format(name='left')}' >/dev/null 2>&1 & sleep 0.2"
    server = HEARTBEAT.format(name="server")
    calls = [shell(daemon, escalate="network", justification="a mirror"),
             shell(server, escalate="network", justification="a dev server", background=True),
             shell("sleep 0.3; " + STILL_BEATING.format(name="left") + "; "
                   + STILL_BEATING.format(name="server"))]
    bot = Deskbot(Answer("approve"), Answer("approve"))
    _r, records, _e, _m = await turn(workspace, [{"tool_calls": calls}, {"text": "ok"}], bot)
    assert [r["outcome"] for r in records] == ["ran", "ran", "ran"], records
    assert "left stopped" in records[2]["output"] and "server beats" in records[2]["output"]


async def test_an_approved_background_command_s_leftovers_end_when_it_is_stopped(
        workspace: Path) -> None:
    """A relay it left (setsid) keeps the network no longer than the command itself; and
    "always" for a command in the foreground is not an approval to run it in the
    background."""
    (workspace / "serve.sh").write_text("echo built\n")
    script = (f"setsid sh -c '{HEARTBEAT.format(name='relay')}' >/dev/null 2>&1 &\n"
              f"{HEARTBEAT.format(name='server')}\n")
    check = ("sleep 0.3; " + STILL_BEATING.format(name="server") + "; "
             + STILL_BEATING.format(name="relay"))
    calls = [shell("sh serve.sh", escalate="network", justification="build"),
             {"name": "fs_write", "arguments": {"path": "serve.sh", "content": script}},
             shell("sh serve.sh", escalate="network", justification="serve", background=True),
             shell(check), {"name": "shell_stop", "arguments": {"id": "bg1"}}, shell(check)]
    bot = Deskbot(Answer("approve_session"), Answer("approve"))
    _r, records, _e, _m = await turn(workspace, [{"tool_calls": calls}, {"text": "ok"}], bot,
                                     approval="on-request")
    assert len(bot.questions) == 2, "the background run is asked about on its own"
    assert "server beats" in records[3]["output"] and "relay beats" in records[3]["output"]
    assert "server stopped" in records[5]["output"] and "relay stopped" in records[5]["output"]


async def test_a_broken_rules_file_stops_what_writes_or_runs_but_not_reads(
        workspace: Path) -> None:
    (workspace / ".hookline").mkdir()
    (workspace / ".hookline" / "rules.toml").write_text('[[rules]]\naction = "maybe"\n')
    (workspace / "a.txt").write_text("text")
    _r, records, _e, _m = await turn(
        workspace, [{"tool_calls": [{"name": "fs_read", "arguments": {"path": "a.txt"}},
                                    shell("echo hi")]}, {"text": "ok"}])
    assert [r["outcome"] for r in records] == ["ran", "denied"]
    assert "rules.toml rule 1: action must be one of allow, ask, deny" in records[1]["error"]


def test_question_json_is_what_the_gateway_sends() -> None:
    question = Question("q1", "s", "shell", {"command": "ls"}, "ls", "why", "because",
                        "network", ("-a", "+b"))
    assert json.loads(json.dumps(question.as_dict())) == {
        "id": "q1", "tool": "shell", "arguments": {"command": "ls"}, "summary": "ls",
        "justification": "because", "reason": "why", "escalate": "network", "diff": "-a\n+b",
        "approve_session": True}
    outside = Question("q2", "s", "shell", {"command": "make"}, "make", "why",
                       escalate="unsandboxed")
    assert outside.as_dict()["approve_session"] is False


@pytest.mark.parametrize(("first", "shown"), [
    (shell("exit 3"), "exit code: 3"),
    (shell("exit 3", network=True), None),  # refused arguments: it never ran
    (shell("echo fine"), None),
])
async def test_an_escalation_shows_the_failure_of_the_same_command_only_if_it_ran(
        workspace: Path, first: dict[str, Any], shown: str | None) -> None:
    """The question of an escalation says how the same command failed in the sandbox;
    a call of it that never ran (its arguments refused) or that worked is no such failure."""
    command = first["arguments"]["command"]
    bot = Deskbot(Answer("deny", "no"))
    escalated = shell(command, escalate="network", justification="needs the index")
    await turn(workspace, [{"tool_calls": [first]}, {"tool_calls": [escalated]},
                           {"text": "ok"}], bot)
    (question,) = bot.questions
    if shown is None:
        assert "In the sandbox it failed" not in question.reason, question.reason
    else:
        assert f"In the sandbox it failed:\n{shown}" in question.reason, question.reason


async def test_the_diff_of_a_question_reads_the_file_as_the_tools_would(
        workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The diff is read through the session's environment: a file the settings keep from
    the tools (here a `sandbox_deny_read` entry of yours) is not shown in the question."""
    monkeypatch.setenv("HOME", str(workspace))
    (workspace / "private").mkdir()
    (workspace / "private" / "notes.txt").write_text("SECRET line\n")
    bot = Deskbot(Answer("deny", "no"))
    write = {"name": "fs_write", "arguments": {"path": "private/notes.txt", "content": "x\n"}}
    await turn(workspace, [{"tool_calls": [write]}, {"text": "ok"}], bot, approval="ask",
               sandbox_deny_read=("~/private",))
    (question,) = bot.questions
    assert question.diff and not any("SECRET" in line for line in question.diff), question.diff


async def test_the_approval_event_keeps_a_long_text_argument_cut_and_counted(
        workspace: Path) -> None:
    content = "a" * 1000
    write = {"name": "fs_write", "arguments": {"path": "big.txt", "content": content}}
    _r, _records, events, _m = await turn(
        workspace, [{"tool_calls": [write]}, {"text": "ok"}],
        rules=[{"action": "allow", "tool": "fs_write"}])
    assert events[0]["arguments"] == {"path": "big.txt",
                                      "content": "a" * 200 + "... [800 more characters]"}
    assert (workspace / "big.txt").read_text() == content


def test_paging_a_spilled_output_is_a_read(tmp_path: Path) -> None:
    """fs_read of a long file hands the model its start and a spill id: reading on must not
    be a question under `ask` (nor a denial where nobody answers)."""
    from hookline.builtins.approval import ApprovalGate
    from hookline.builtins.config import Settings

    settings = Settings(home=tmp_path / "home")
    gate = ApprovalGate(lambda: settings, lambda: str(tmp_path))
    for tool in ("spill.read", "spill_read"):
        judged = gate.judge(tool, {"id": "s1", "offset": 2000}, "ask", settings, str(tmp_path))
        assert judged.need == "run", judged.reason
    assert gate.judge("fs_write", {"path": "a"}, "ask", settings, str(tmp_path)).need == "ask"


class WaitingDeskbot(Deskbot):
    """Asks, and waits for an answer that never comes: the turn is cancelled meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        import anyio

        self.asked = anyio.Event()

    async def ask(self, question: Question) -> Answer:
        import anyio

        self.questions.append(question)
        self.asked.set()
        await anyio.sleep(60)
        raise AssertionError("the turn was not cancelled")


async def test_a_call_cancelled_at_its_question_is_said_not_to_have_run(
        workspace: Path) -> None:
    """Ctrl-C while the approval is asked: the call did not run, and the model is told so,
    not to check what it may have changed."""
    import anyio

    from hookline.builtins.agent.interruption import NOT_STARTED_CALL

    bot = WaitingDeskbot()
    framework, _builtin = build_builtin(
        workspace, [{"tool_calls": [shell("touch never-ran.txt")]}, {"text": "ok"}], bot,
        approval="ask")
    async with framework.running():
        async with anyio.create_task_group() as group:
            group.start_soon(framework.process_inbound, {"content": "go", "session_id": SESSION})
            await bot.asked.wait()
            group.cancel_scope.cancel()
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    (record,) = [record for entry in entries if entry.kind == "tool_result"
                 for record in entry.payload["results"]]
    assert record["outcome"] == "cancelled" and record["output"] == NOT_STARTED_CALL
    assert not (workspace / "never-ran.txt").exists()


async def test_a_call_cancelled_while_its_tool_runs_may_have_partly_run(
        workspace: Path) -> None:
    import anyio

    from hookline.builtins.agent.interruption import CANCELLED_CALL

    framework, _builtin = build_builtin(
        workspace, [{"tool_calls": [shell("touch started.txt; sleep 30")]}, {"text": "ok"}])
    async with framework.running():
        async with anyio.create_task_group() as group:
            group.start_soon(framework.process_inbound, {"content": "go", "session_id": SESSION})
            with anyio.fail_after(30):
                while not (workspace / "started.txt").exists():
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    (record,) = [record for entry in entries if entry.kind == "tool_result"
                 for record in entry.payload["results"]]
    assert record["outcome"] == "cancelled" and record["output"] == CANCELLED_CALL


async def test_an_edit_that_cannot_apply_is_not_asked_about(workspace: Path) -> None:
    """Its `old` text is twice in the file: approving its diff would change nothing (the
    tool refuses it), so nobody is asked and the model is told why."""
    (workspace / "dup.txt").write_text("x = 1\nx = 1\n")
    bot = Deskbot(Answer("approve"))
    edit = {"name": "fs_edit", "arguments": {"path": "dup.txt", "old": "x = 1", "new": "x = 2"}}
    _r, records, events, _m = await turn(workspace, [{"tool_calls": [edit]}, {"text": "ok"}],
                                         bot, approval="ask")
    assert bot.questions == []
    assert records[0]["outcome"] == "denied"
    assert "its 'old' text occurs 2 times in 'dup.txt'" in records[0]["error"]
    assert events[0]["by"] == "gate"
    assert (workspace / "dup.txt").read_text() == "x = 1\nx = 1\n"
