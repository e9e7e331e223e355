"""Recording plugins shared by the tests: one class answers any hook, instead of a copied
class per hook.

`Answering("system_prompt", "block", seen)` implements `system_prompt` with the hook's own
parameters (read from `HOOK_SPECS`, so the kernel passes exactly what the spec promises),
appends each call's arguments to `seen` as a tuple in the spec's order, counts the calls,
and returns the fixed result (or raises it, when it is an exception). `AsyncAnswering` is
the same with an `async def` implementation, for the tests that await it.
`FakeEnvironment` is an environment that only logs its close.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from hookline.kernel import HOOK_SPECS, hookimpl
from hookline.kernel.environment import Environment


class Answering:
    """A plugin implementing one hook: records the arguments, returns ``result``."""

    def __init__(
        self,
        hook: str,
        result: Any = None,
        seen: list[Any] | None = None,
        *,
        tryfirst: bool = False,
        trylast: bool = False,
    ) -> None:
        self.result, self.seen = result, seen
        self.calls = 0
        params = HOOK_SPECS[hook].params
        function = self._implementation(params)
        function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in params]
        )
        function.__qualname__ = f"{type(self).__name__}.{hook}"
        setattr(self, hook, hookimpl(tryfirst=tryfirst, trylast=trylast)(function))

    def _implementation(self, params: tuple[str, ...]) -> Callable[..., Any]:
        def answer(**arguments: Any) -> Any:
            return self.answer(params, arguments)

        return answer

    def answer(self, params: tuple[str, ...], arguments: dict[str, Any]) -> Any:
        """Record one call and give the fixed result."""
        self.calls += 1
        if self.seen is not None:
            self.seen.append(tuple(arguments[name] for name in params))
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


class AsyncAnswering(Answering):
    """`Answering` with an ``async def`` implementation."""

    def _implementation(self, params: tuple[str, ...]) -> Callable[..., Any]:
        async def answer(**arguments: Any) -> Any:
            return self.answer(params, arguments)

        return answer


class FakeEnvironment(Environment):
    """An environment that does nothing but log (and optionally fail) its close."""

    def __init__(self, name: str = "fake", log: list[str] | None = None,
                 fail_close: bool = False) -> None:
        super().__init__()
        self.name, self.fail_close = name, fail_close
        self.log = [] if log is None else log

    async def spawn(self, command, *, cwd=None, env=None):  # pragma: no cover - unused
        raise NotImplementedError

    async def read_text(self, path):  # pragma: no cover - unused
        raise NotImplementedError

    async def write_text(self, path, content):  # pragma: no cover - unused
        raise NotImplementedError

    async def run_code(self, code, *, tools, call_tool, write):  # pragma: no cover - unused
        raise NotImplementedError

    async def close(self) -> None:
        self.log.append(f"close {self.name}")
        if self.fail_close:
            raise OSError(f"cannot close {self.name}")
