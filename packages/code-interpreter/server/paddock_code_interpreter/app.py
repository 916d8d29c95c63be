"""The HTTP routes the code-interpreter SDKs call (port 49999 in a sandbox).

``POST /execute`` answers with one JSON object per line while the cell runs.
When the client goes away before the cell ends (the SDKs' ``timeoutMs``
closes the request), the kernel is interrupted and the cell's remaining
output is read and dropped, so the context is idle for its next call.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Optional

from tornado import httpclient, web
from tornado.iostream import StreamClosedError

from .contexts import ContextError
from .registry import Registry

log = logging.getLogger("paddock.code-interpreter")


class Base(web.RequestHandler):
    registry: Registry

    def initialize(self, registry: Registry, envd_url: Optional[str]) -> None:
        self.registry = registry
        self.envd_url = envd_url

    def body(self) -> dict[str, Any]:
        if not self.request.body:
            return {}
        try:
            data = json.loads(self.request.body)
        except ValueError as err:
            raise ContextError(400, f"the body is not JSON: {err}") from err
        if not isinstance(data, dict):
            raise ContextError(400, "the body must be a JSON object")
        return data

    def send_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(value))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None))[1]
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(str(exc) if isinstance(exc, (ContextError, web.HTTPError)) else self._reason)

    def _handle_request_exception(self, e: BaseException) -> None:
        if isinstance(e, ContextError):
            if self._headers_written:
                return
            self.set_status(e.status)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish(str(e))
            return
        super()._handle_request_exception(e)


def _optional_str(data: dict[str, Any], key: str) -> Optional[str]:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ContextError(400, f"'{key}' must be a string, not {type(value).__name__}")
    return value


class Health(Base):
    def get(self) -> None:
        ready = self.application.settings.get("ready")
        if ready is None or not ready.done() or ready.exception():
            self.send_json("starting", 503)
            return
        self.send_json("OK")


class Execute(Base):
    _gone = False
    _running: Any = None

    def on_connection_close(self) -> None:
        if self._gone:
            return
        self._gone = True
        # Only a cell of this request is interrupted; one still waiting for its context is not run at all.
        if self._running is not None:
            self.application.settings["interrupts"].add(self._running)

    def _started(self, context: Any) -> bool:
        if self._gone:
            return False
        self._running = context
        return True

    async def post(self) -> None:
        data = self.body()
        code = data.get("code")
        if not isinstance(code, str):
            raise ContextError(400, "'code' must be a string")
        context_id = _optional_str(data, "context_id")
        language = _optional_str(data, "language")
        if context_id and language:
            raise ContextError(400, "give 'context_id' or 'language', not both")
        env_vars = data.get("env_vars") or {}
        if not isinstance(env_vars, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
            raise ContextError(400, "'env_vars' must be an object of strings")
        bad = [k for k in env_vars if not k or not (k[0].isalpha() or k[0] == "_") or not all(c.isalnum() or c == "_" for c in k)]
        if bad:
            raise ContextError(400, f"'{bad[0]}' is not an environment variable name")
        context = self.registry.get(context_id) if context_id else await self.registry.default(language)
        token = self.request.headers.get("X-Access-Token")

        self.set_header("Content-Type", "application/x-ndjson")
        # Each line leaves as it is flushed: with Nagle's algorithm (tornado's
        # default until a response ends) a line could wait for the previous
        # one's acknowledgement.
        stream = getattr(self.request.connection, "stream", None)
        if stream is not None:
            stream.set_nodelay(True)
        try:
            async for item in context.execute(code, env_vars, lambda: self._sandbox_env(token), lambda: self._started(context)):
                if self._gone:
                    continue
                try:
                    self.write(json.dumps(item) + "\n")
                    await self.flush()
                except StreamClosedError:
                    self.on_connection_close()
        except ContextError:
            if not self._gone:
                raise
        if not self._gone:
            self.finish()

    async def _sandbox_env(self, token: Optional[str]) -> dict[str, str]:
        """The sandbox's environment variables as envd has them; none when envd cannot say."""
        if not self.envd_url:
            return {}
        headers = {"X-Access-Token": token} if token else {}
        try:
            res = await httpclient.AsyncHTTPClient().fetch(f"{self.envd_url}/envs", headers=headers, request_timeout=5)
            value = json.loads(res.body)
            return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(value, dict) else {}
        except Exception as err:
            log.warning("the sandbox's environment variables could not be read from envd: %s", err)
            return {}


class Contexts(Base):
    async def get(self) -> None:
        self.send_json([c.describe() for c in self.registry.list()])

    async def post(self) -> None:
        data = self.body()
        context = await self.registry.create(_optional_str(data, "language"), _optional_str(data, "cwd"))
        self.send_json(context.describe())


class OneContext(Base):
    async def delete(self, context_id: str) -> None:
        await self.registry.remove(context_id)
        self.set_status(204)
        self.finish()


class Restart(Base):
    async def post(self, context_id: str) -> None:
        await self.registry.get(context_id).restart()
        self.set_status(204)
        self.finish()


class Interrupts:
    """Interrupts asked for by requests whose clients went away, run on the loop."""

    def __init__(self) -> None:
        import asyncio

        self._asyncio = asyncio
        self._tasks: set = set()

    def add(self, context: Any) -> None:
        task = self._asyncio.ensure_future(context.interrupt())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def make_app(registry: Registry, ready: Any, envd_url: Optional[str]) -> web.Application:
    args = {"registry": registry, "envd_url": envd_url}
    return web.Application(
        [
            (r"/health", Health, args),
            (r"/execute", Execute, args),
            (r"/contexts", Contexts, args),
            (r"/contexts/([^/]+)", OneContext, args),
            (r"/contexts/([^/]+)/restart", Restart, args),
        ],
        ready=ready,
        interrupts=Interrupts(),
    )
