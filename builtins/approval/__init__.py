"""Approvals: the rules and the policy that decide whether a tool call runs, is denied or
waits for a person, and the question and answer that pass between them (docs/approvals.md).

Names are imported on first use."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "gate": ("READ_ONLY_TOOLS", "ApprovalGate"),
    "question": ("ANSWER_DECISIONS", "ANSWER_KEYS", "APPROVAL_ASKER", "APPROVAL_POLICY",
                 "APPROVAL_RECORD", "Answer", "Asker", "Question", "parse_answer"),
    "rules": ("RULES_TABLE", "WORKSPACE_RULES", "Rule", "RuleError", "RuleSet", "Verdict",
              "check_config_rules", "load_rules", "trust_workspace_rules"),
    "shellwords": ("ShellCommands", "split_commands"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
