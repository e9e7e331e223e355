"""What a failed republic call becomes: one `HooklineError` whose message names the
provider, the model and what to set.

Kind `config` for what configuration fixes (unknown provider, bad api format, rejected or
missing key, unknown model or endpoint), kind `provider` for what the service did (rate
limit, server error, refused request, connection failure, broken stream). Each case below
only says which kind, which words and which details; `describe_failure` alone builds the
error, so every one gets the same redaction and the same base details.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from hookline.kernel.errors import ErrorKind, HooklineError

from ..config import setting_env
from ..privacy.redact import redact_credentials
from .base import stated_window
from .retries import body_message, out_of_quota, retry_after, too_long

__all__ = ["OVERFLOW_FIX", "Subject", "describe_failure", "waiting_may_mend"]

OVERFLOW_FIX = ("Set context_window to the model's window (in tokens), or start a new "
                "session (--new).")
"""What to do about a request the model refused as too long."""

Problem: TypeAlias = tuple[ErrorKind, str, dict[str, Any]]
"""A failure described: its kind, its message, and the details it adds to the subject's."""


DEFAULT_ENDPOINT = "the default endpoint"
"""A subject's `endpoint` when no api_base was given (the provider's own)."""


@dataclass(frozen=True)
class Subject:
    """The model a failure is described for, as its messages name it."""

    name: str
    provider: str
    model: str
    endpoint: str
    """Where the call went, without credentials (`the default endpoint` when unknown)."""
    env_prefix: str
    """The prefix of republic's own variables for the provider (`REPUBLIC_OPENAI`)."""
    key_configured: bool
    max_retry_delay: float
    api_format: str | None
    details: dict[str, Any]
    """What every error about this model carries (provider, model, api_base)."""

    @property
    def key_vars(self) -> str:
        return (f"{setting_env('api_key')} (or api_key in the config file) or "
                f"{self.env_prefix}_API_KEY")

    @property
    def base_vars(self) -> str:
        return (f"{setting_env('api_base')} (or api_base in the config file) or "
                f"{self.env_prefix}_API_BASE")


def waiting_may_mend(error: BaseException) -> bool:
    """A provider's refusal that a later try may get past: a 429 (rate limit) or a 503
    (overloaded), not out of quota (a 429 of kind `config`: waiting will not help)."""
    if not isinstance(error, HooklineError) or error.kind is ErrorKind.config:
        return False
    return (error.details or {}).get("status") in (429, 503)


def describe_failure(subject: Subject, exc: BaseException, *, attempts: int = 1,
                     midstream: bool = False) -> HooklineError:
    """`exc` as the one error the caller raises; the text of the underlying error may spell
    out the URL, so credentials are taken out of the message. `midstream`: the reply had
    begun, so the server was running (a cut, not a refusal)."""
    from republic import errors

    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if isinstance(exc, errors.APIStatusError):
        kind, message, extra = _refusal(subject, exc, tries)
    else:
        kind, message, extra = (_transport_failure(subject, exc, tries, midstream)
                                or _setup_failure(subject, exc))
    return HooklineError(kind, redact_credentials(message), {**subject.details, **extra})


def _refusal(subject: Subject, exc: Any, tries: str) -> Problem:
    """An HTTP status the provider answered with."""
    name, status, model_var = subject.name, exc.status_code, setting_env("model")
    other_model = f"choose another model (--model, /model in the chat, or {model_var})"
    said = body_message(exc.body)
    said = f": {said}" if said else ""
    details: dict[str, Any] = {"status": status}
    if status == 403 and subject.key_configured:
        return (ErrorKind.config,
                f"{name}: {subject.provider} refused the key at {subject.endpoint} (HTTP "
                f"403{said}): it may not use this model or endpoint. Check the key's "
                f"permissions and the model name in {model_var}, or set {subject.key_vars} "
                f"to a key that may.", details)
    if status in (401, 403):
        problem = ("the API key was rejected" if subject.key_configured
                   else "no API key is configured")
        return (ErrorKind.config,
                f"{name}: authentication failed at {subject.endpoint} (HTTP {status}{said}); "
                f"{problem}. Set {subject.key_vars} to a valid key for {subject.provider}.",
                details)
    if status == 404:
        # openai: speaks the Responses API unless told otherwise, which a server of one's
        # own (Ollama, vLLM, llama.cpp) most often lacks.
        chat = (f" A server that speaks only chat completions wants {setting_env('api_format')}"
                f"=chat, or the provider openai-compatible:{subject.model}."
                if subject.provider == "openai" and subject.api_format in (None, "responses")
                and subject.endpoint != DEFAULT_ENDPOINT else "")
        return (ErrorKind.config,
                f"{name}: not found at {subject.endpoint} (HTTP 404{said}). Check the model "
                f"name {subject.model!r} in {model_var}, and the endpoint: set "
                f"{subject.base_vars}.{chat}", details)
    if status == 429 and out_of_quota(exc.body):
        return (ErrorKind.config,
                f"{name}: {subject.provider} says the account is out of quota or credit "
                f"(HTTP 429{said}); waiting will not help: check the plan and billing of "
                f"the key, or {other_model}.", details)
    asked = retry_after(exc)
    if asked is not None:
        details["retry_after"] = asked
    if status == 429:
        # An HTTP date's wait is measured to the millisecond: said in whole seconds.
        shown = "" if asked is None else f"{asked:g}" if asked < 10 else f"{asked:.0f}"
        wait = f"; it asks to wait {shown} s" if asked is not None else ""
        longer = (f", more than retry_max_wait ({subject.max_retry_delay:g} s) allows"
                  if asked is not None and asked > subject.max_retry_delay else "")
        return (ErrorKind.provider,
                f"{name}: rate limited by {subject.provider} (HTTP 429{said}){tries}{wait}"
                f"{longer}. Try again later, or {other_model}.", details)
    if status == 400 and too_long(exc.body):
        if window := stated_window(str(exc.body)):
            details["stated_window"] = window
        return (ErrorKind.provider,
                f"{name}: the request is longer than the model's context window (HTTP "
                f"400{said}). {OVERFLOW_FIX}", details)
    if status >= 500:
        return (ErrorKind.provider,
                f"{name}: the provider failed (HTTP {status}{said}){tries}. Try again "
                f"later, or {other_model}.", details)
    return (ErrorKind.provider,
            f"{name}: the provider rejected the request (HTTP {status}{said}). Check what "
            f"the model supports: tools, {setting_env('max_tokens')}, "
            f"{setting_env('api_format')}.", details)


def _transport_failure(subject: Subject, exc: BaseException, tries: str,
                       midstream: bool) -> Problem | None:
    """The connection or the stream failed, or the provider reported an error in it;
    None for any other failure."""
    from republic import errors

    name, endpoint = subject.name, subject.endpoint
    if isinstance(exc, errors.APIConnectionError) and midstream:
        return (ErrorKind.provider,
                f"{name}: the connection to {endpoint} was cut while the reply was arriving "
                f"(the reply is incomplete). Try again.", {})
    if isinstance(exc, errors.APIConnectionError):
        cause = exc.__cause__
        reason = f": {cause}" if cause is not None and str(cause) else ""
        what = "timed out" if isinstance(exc, errors.APITimeoutError) else "connection failed"
        return (ErrorKind.provider,
                f"{name}: {what} talking to {endpoint}{reason}{tries}. Check that the server "
                f"is running and reachable, and the endpoint: set {subject.base_vars}.", {})
    if isinstance(exc, errors.StreamIncompleteError):
        return (ErrorKind.provider,
                f"{name}: the response stream from {endpoint} ended before it was complete. "
                "Try again; if it persists, the server may not support streaming.", {})
    if isinstance(exc, errors.APIResponseError):
        return (ErrorKind.provider,
                f"{name}: the provider reported an error: {body_message(str(exc))}", {})
    return None


def _setup_failure(subject: Subject, exc: BaseException) -> Problem:
    """What the provider's set-up refused (provider, API format, feature, credentials), or
    any other failure of the call."""
    from republic import errors

    name, format_var = subject.name, setting_env("api_format")
    if isinstance(exc, errors.ProviderNotFoundError):
        import republic

        known = ", ".join(republic.all_providers())
        return (ErrorKind.config,
                f"{name}: unknown provider {subject.provider!r}. Set {setting_env('model')} "
                f"to '<provider>:<model>' with one of: {known}; or 'offline'.", {})
    if isinstance(exc, errors.UnsupportedApiFormatError):
        return (ErrorKind.config,
                f"{name}: {exc}. Set {format_var} (or api_format in the config file) to "
                "a format the provider supports, or unset it.",
                {"api_format": subject.api_format})
    if isinstance(exc, errors.UnsupportedFeatureError):
        return (ErrorKind.config,
                f"{name}: {exc}. Choose another model or API format ({format_var}).", {})
    if isinstance(exc, errors.AuthenticationError):
        return (ErrorKind.config,
                f"{name}: cannot load credentials for {subject.provider}: {exc}. "
                f"Set {subject.key_vars}, or sign in with the provider's tool.", {})
    return (ErrorKind.provider,
            f"{name}: the model call failed: {type(exc).__name__}: {exc}", {})
