"""`hookline rules`: see which approval rule decides a call, and trust a workspace's rules
file (docs/approvals.md)."""

from __future__ import annotations

import json
import logging
import os
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .output import fail


def rules_commands(framework: Framework) -> typer.Typer:
    """The `rules` command group."""
    group = typer.Typer(name="rules", no_args_is_help=True,
                        help="Approval rules: which one decides a call; trust a workspace's.")

    @group.command(name="check")
    def check(
        call: Annotated[str, typer.Argument(
            metavar="CALL", help="The tool and its argument: 'shell git status && make', "
                                 "'fs_write docs/a.md', or 'TOOL {json arguments}'.")],
        approval: Annotated[str | None, typer.Option(
            "--approval", metavar="POLICY",
            help="Judge under this policy (default: the approval setting).")] = None,
    ) -> None:
        """Say what would happen to a call: which rule matches (or none) and why, and what
        the approval policy then does (runs, asks, denied)."""
        from hookline.builtins.approval import ApprovalGate, RuleError
        from hookline.builtins.config import APPROVAL_POLICIES, load_settings

        tool, _space, rest = call.strip().partition(" ")
        if not tool:
            fail(ValueError("give the call to check, such as 'shell git status'"))
        try:
            settings = load_settings()
        except Exception as exc:
            fail(exc)
        policy = approval or settings.approval
        if policy not in APPROVAL_POLICIES:
            fail(ValueError(f"--approval must be one of {', '.join(APPROVAL_POLICIES)}"))
        workspace = str(framework.workspace)
        gate = ApprovalGate(lambda: settings, lambda: workspace)
        # What the gate would warn about at a turn is said below, as a note, once.
        logging.getLogger(ApprovalGate.__module__).setLevel(logging.ERROR)
        try:
            rules = gate.rules(settings, workspace)
        except RuleError as exc:
            fail(exc)
        arguments = _arguments(tool, rest.strip())
        verdict = rules.judge(tool, arguments, workspace)
        judgement = gate.judge(tool, arguments, policy, settings, workspace)
        for line in rules.ignored:
            typer.echo(f"note: {line}", err=True)
        rule = verdict.rule.describe() if verdict.rule is not None else "no rule"
        typer.echo(f"rule: {rule}")
        typer.echo(f"why: {verdict.detail}")
        outcome = {"run": "runs", "ask": "asks you first", "deny": "denied"}[judgement.need]
        typer.echo(f"approval = {policy}: {outcome} ({judgement.reason})")

    @group.command(name="trust")
    def trust() -> None:
        """Let the allow rules of this workspace's .hookline/rules.toml count, for its
        content as it is now (a change needs trusting again); read the file first."""
        from hookline.builtins.approval import RuleError, trust_workspace_rules
        from hookline.builtins.config import load_settings

        try:
            path = trust_workspace_rules(str(framework.workspace), load_settings().home)
        except (RuleError, OSError) as exc:
            fail(exc)
        typer.echo(f"trusted: {path} (as it is now)")

    return group


def _arguments(tool: str, rest: str) -> dict[str, Any]:
    """The call's arguments from the text after the tool's name."""
    name = tool.replace(".", "_")
    if rest.startswith("{"):
        try:
            value = json.loads(rest)
        except ValueError as exc:
            fail(ValueError(f"the arguments are not valid JSON: {exc}"))
        if not isinstance(value, dict):
            fail(ValueError("the arguments must be a JSON object"))
        return value
    if name == "shell":
        return {"command": rest}
    if name.startswith("fs_"):
        return {"path": rest or os.curdir}
    return {}
