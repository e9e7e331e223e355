"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .archive import archive_session as archive_session
from .archive import delete_session as delete_session
from .archive import file_safe as file_safe
from .archive import write_archive as write_archive
from .context import RESUMES as RESUMES
from .context import STEERED as STEERED
from .context import ContextMessages as ContextMessages
from .context import answered_calls as answered_calls
from .context import messages_from_entries as messages_from_entries
from .context import starts_turn as starts_turn
from .fork import COMMIT_OBSERVER as COMMIT_OBSERVER
from .fork import ForkStore as ForkStore
from .fork import TapeRecordError as TapeRecordError
from .fork import observed_commit as observed_commit
from .kept import KEPT_CONTEXTS as KEPT_CONTEXTS
from .kept import KEPT_ENTRIES as KEPT_ENTRIES
from .kept import KeptContext as KeptContext
from .kept import kept_context as kept_context
from .naming import session_tape_name as session_tape_name
from .naming import should_merge_back as should_merge_back
from .sessions import CURRENT_SESSIONS_FILE as CURRENT_SESSIONS_FILE
from .sessions import DEFAULT_SESSION as DEFAULT_SESSION
from .sessions import MAX_CURRENT_SESSIONS as MAX_CURRENT_SESSIONS
from .sessions import MAX_TITLE as MAX_TITLE
from .sessions import TITLE_EVENT as TITLE_EVENT
from .sessions import SessionError as SessionError
from .sessions import SessionMatch as SessionMatch
from .sessions import SessionSummary as SessionSummary
from .sessions import checked_title as checked_title
from .sessions import current_session as current_session
from .sessions import find_session as find_session
from .sessions import last_turns as last_turns
from .sessions import list_sessions as list_sessions
from .sessions import local_date as local_date
from .sessions import new_session_id as new_session_id
from .sessions import one_line as one_line
from .sessions import rename_session as rename_session
from .sessions import search_sessions as search_sessions
from .sessions import set_current_session as set_current_session
from .sessions import transcript as transcript
from .spill import SPILL_EVENT as SPILL_EVENT
from .spill import SPILL_READ_TOOLS as SPILL_READ_TOOLS
from .spill import SPILL_SIDECAR as SPILL_SIDECAR
from .spill import SpillSidecar as SpillSidecar
from .spill import find_spill as find_spill
from .spill import spill_result as spill_result
from .summary import AnchorInfo as AnchorInfo
from .summary import TapeInfo as TapeInfo
from .tape import BOOTSTRAP_ANCHOR as BOOTSTRAP_ANCHOR
from .tape import Tape as Tape
from .tools import SEARCH_LIMIT_MAX as SEARCH_LIMIT_MAX
from .tools import SPILL_READ_MAX as SPILL_READ_MAX
from .tools import spill_tools as spill_tools
from .tools import tape_tools as tape_tools
