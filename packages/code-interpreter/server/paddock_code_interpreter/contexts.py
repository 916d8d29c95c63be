"""Contexts: one Jupyter kernel each, its state kept between executions.

An execution is sent on the kernel's shell channel and its messages are read
from the iopub channel until the kernel is idle again for it. Executions of
one context run one at a time. Per-call environment variables are set before
the cell and put back after it by silent executions of the kernel's own
language, so the next cell does not see them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Optional

from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager

from . import outputs
from .kernelspecs import LANGUAGES

log = logging.getLogger("paddock.code-interpreter")

# How long a kernel may take to answer its first request.
KERNEL_READY_TIMEOUT = 60.0


class ContextError(Exception):
    """A request the contexts cannot serve; `status` is the HTTP status it answers."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class _Pending:
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    started: bool = False
    errored: bool = False


def _quote(language: str, value: str) -> str:
    if language == "bash":
        return shlex.quote(value)
    # JSON string literals are valid Python and JavaScript string literals.
    return json.dumps(value)


def _set_env_code(language: str, env: dict[str, Optional[str]]) -> str:
    """Code that sets (a value) or removes (None) each variable."""
    lines = []
    for key, value in env.items():
        k = _quote(language, key)
        if language == "python":
            lines.append(f"__import__('os').environ[{k}] = {_quote(language, value)}" if value is not None else f"__import__('os').environ.pop({k}, None)")
        elif language in ("javascript", "typescript"):
            lines.append(f"process.env[{k}] = {_quote(language, value)};" if value is not None else f"delete process.env[{k}];")
        elif language == "bash":
            lines.append(f"export {key}={_quote(language, value)}" if value is not None else f"unset {key}")
    return "\n".join(lines)


def _read_env_code(language: str, keys: list[str]) -> str:
    """Code whose output is a JSON object of the variables' values (null when unset)."""
    if language == "python":
        return f"print(__import__('json').dumps({{k: __import__('os').environ.get(k) for k in {json.dumps(keys)}}}))"
    if language in ("javascript", "typescript"):
        return f"console.log(JSON.stringify(Object.fromEntries({json.dumps(keys)}.map((k) => [k, process.env[k] ?? null]))))"
    parts = " ".join(f'"$(if [ -n "${{{k}+x}}" ]; then printf %s "${k}" | base64 -w0; else printf -- -; fi)"' for k in keys)
    return f"printf '%s\\n' {parts}"


def _chdir_code(language: str, cwd: str) -> str:
    q = _quote(language, cwd)
    if language == "python":
        return f"__import__('os').chdir({q})"
    if language in ("javascript", "typescript"):
        return f"process.chdir({q});"
    return f"cd {q}"


class Context:
    """One kernel: its manager, its client, and the executions waiting on it."""

    def __init__(self, language: str, cwd: str, kernel_specs: KernelSpecManager):
        self.language = language
        self.cwd = cwd
        self.id = ""
        self._manager = AsyncKernelManager(kernel_name=LANGUAGES[language][0], kernel_spec_manager=kernel_specs)
        self._client: Any = None
        self._pending: dict[str, _Pending] = {}
        self._reader: Optional[asyncio.Task] = None
        self._lock = asyncio.Lock()
        self._sandbox_env: Optional[dict[str, str]] = None

    def describe(self) -> dict[str, str]:
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    async def start(self, kernel_id: Optional[str] = None) -> None:
        await self._manager.start_kernel(cwd=self.cwd, **({"kernel_id": kernel_id} if kernel_id else {}))
        self.id = self._manager.kernel_id
        await self._connect()

    async def _connect(self) -> None:
        self._client = self._manager.client()
        self._client.start_channels()
        await self._client.wait_for_ready(timeout=KERNEL_READY_TIMEOUT)
        self._reader = asyncio.create_task(self._read_iopub())
        # The working directory is set by the kernel's own code too: a restart starts where the server runs.
        await self._silent(_chdir_code(self.language, self.cwd))

    def _disconnect(self) -> None:
        if self._reader:
            self._reader.cancel()
            self._reader = None
        if self._client:
            self._client.stop_channels()
            self._client = None
        for pending in self._pending.values():
            pending.queue.put_nowait(outputs.error("ContextRestarting", "the context was restarted or removed while the code ran", ""))
            pending.queue.put_nowait(None)
        self._pending.clear()

    async def restart(self) -> None:
        async with self._lock:
            self._disconnect()
            await self._manager.restart_kernel(now=True)
            self._sandbox_env = None
            await self._connect()

    async def shutdown(self) -> None:
        self._disconnect()
        await self._manager.shutdown_kernel(now=True)

    async def interrupt(self) -> None:
        await self._manager.interrupt_kernel()

    async def _read_iopub(self) -> None:
        while True:
            msg = await self._client.get_iopub_msg()
            parent = msg.get("parent_header", {}).get("msg_id")
            pending = self._pending.get(parent) if parent else None
            if pending is None:
                continue
            try:
                self._dispatch(msg, pending)
            except Exception:  # a message of a shape we do not know is logged, not fatal
                log.exception("could not read a kernel message of type %s", msg.get("msg_type"))

    def _dispatch(self, msg: dict[str, Any], pending: _Pending) -> None:
        kind = msg["msg_type"]
        content = msg["content"]
        put = pending.queue.put_nowait
        if kind == "execute_input":
            pending.started = True
            put(outputs.execution_count(content["execution_count"]))
        elif kind == "stream":
            name = content.get("name")
            if name in ("stdout", "stderr"):
                put(outputs.stream(name, content["text"], str(msg["header"].get("date") or "")))
        elif kind in ("display_data", "execute_result"):
            put(outputs.result(dict(content.get("data", {})), kind == "execute_result"))
        elif kind == "error":
            if not pending.errored:
                pending.errored = True
                put(outputs.error(content.get("ename", ""), content.get("evalue", ""), content.get("traceback", [])))
        elif kind == "status":
            state = content.get("execution_state")
            if state == "busy":
                pending.started = True
            elif state == "idle" and pending.started:
                put(None)

    async def _run(self, code: str, store_history: bool) -> AsyncIterator[dict[str, Any]]:
        msg_id = uuid.uuid4().hex
        pending = _Pending()
        self._pending[msg_id] = pending
        try:
            content = {"code": code, "silent": False, "store_history": store_history, "user_expressions": {}, "allow_stdin": False, "stop_on_error": False}
            msg = self._client.session.msg("execute_request", content)
            msg["header"]["msg_id"] = msg_id
            msg["msg_id"] = msg_id
            self._client.shell_channel.send(msg)
            while True:
                item = await pending.queue.get()
                if item is None:
                    return
                yield item
        finally:
            self._pending.pop(msg_id, None)

    async def _silent(self, code: str) -> str:
        """Runs code the user does not see; its stdout, or raises with its error."""
        out = []
        async for item in self._run(code, store_history=False):
            if item["type"] == "error":
                raise ContextError(500, f"{item['name']}: {item['value']}")
            if item["type"] == "stdout":
                out.append(item["text"])
        return "".join(out)

    async def _read_env(self, keys: list[str]) -> dict[str, Optional[str]]:
        text = (await self._silent(_read_env_code(self.language, keys))).strip()
        if self.language != "bash":
            return json.loads(text.splitlines()[-1])
        import base64

        values = text.splitlines()[-len(keys):] if keys else []
        return {k: (None if v == "-" else base64.b64decode(v).decode()) for k, v in zip(keys, values)}

    async def execute(
        self,
        code: str,
        env_vars: dict[str, str],
        sandbox_env: Callable[[], Any],
        started: Callable[[], bool] = lambda: True,
    ) -> AsyncIterator[dict[str, Any]]:
        """The cell's output; `started` is called once it has the kernel, and the cell is not run when it says False."""
        async with self._lock:
            if self._client is None:
                raise ContextError(409, f"context '{self.id}' is not running")
            if not started():
                return
            if self._sandbox_env is None:
                # The sandbox's variables (given when it was created) reach kernels started before it was.
                self._sandbox_env = await sandbox_env() or {}
                if self._sandbox_env:
                    await self._silent(_set_env_code(self.language, dict(self._sandbox_env)))
            before: dict[str, Optional[str]] = {}
            if env_vars:
                before = await self._read_env(list(env_vars))
                await self._silent(_set_env_code(self.language, dict(env_vars)))
            try:
                async for item in self._run(code, store_history=True):
                    yield item
            finally:
                if env_vars and self._client is not None:
                    await self._restore_env(before)

    async def _restore_env(self, before: dict[str, Optional[str]]) -> None:
        try:
            await asyncio.shield(self._silent(_set_env_code(self.language, before)))
        except Exception:
            log.exception("could not put back the environment of context %s", self.id)
