"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .gate import READ_ONLY_TOOLS as READ_ONLY_TOOLS
from .gate import ApprovalGate as ApprovalGate
from .question import ANSWER_DECISIONS as ANSWER_DECISIONS
from .question import ANSWER_KEYS as ANSWER_KEYS
from .question import APPROVAL_ASKER as APPROVAL_ASKER
from .question import APPROVAL_POLICY as APPROVAL_POLICY
from .question import APPROVAL_RECORD as APPROVAL_RECORD
from .question import Answer as Answer
from .question import Asker as Asker
from .question import Question as Question
from .question import parse_answer as parse_answer
from .rules import RULES_TABLE as RULES_TABLE
from .rules import WORKSPACE_RULES as WORKSPACE_RULES
from .rules import Rule as Rule
from .rules import RuleError as RuleError
from .rules import RuleSet as RuleSet
from .rules import Verdict as Verdict
from .rules import check_config_rules as check_config_rules
from .rules import load_rules as load_rules
from .rules import trust_workspace_rules as trust_workspace_rules
from .shellwords import ShellCommands as ShellCommands
from .shellwords import split_commands as split_commands
