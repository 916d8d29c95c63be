"""A Jupyter kernel for JavaScript and TypeScript: ipykernel's kernel base
around one Node.js process (node_runner.cjs) that keeps the cells' globals.

    python3 -m paddock_code_interpreter.node_kernel javascript|typescript -f CONNECTION_FILE
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
import uuid
from typing import Any, Optional

from ipykernel.kernelbase import Kernel

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_runner.cjs")
# How long a cell has to stop after an interrupt before its process is replaced.
INTERRUPT_GRACE_S = 3.0


class NodeProcess:
    """The runner, the pipe it reads cells from and the one it writes messages to."""

    def __init__(self, language: str):
        node = shutil.which("node") or shutil.which("nodejs")
        if node is None:
            raise RuntimeError("node is not installed (Debian: nodejs)")
        req_r, self._req_w = os.pipe()
        self._msg_r, msg_w = os.pipe()
        self.proc = subprocess.Popen([node, RUNNER, language, str(req_r), str(msg_w)], stdin=subprocess.DEVNULL, pass_fds=(req_r, msg_w))
        os.close(req_r)
        os.close(msg_w)
        self._buffer = b""

    def send(self, msg: dict[str, Any]) -> None:
        os.write(self._req_w, (json.dumps(msg) + "\n").encode())

    def read(self, timeout: Optional[float]) -> Optional[dict[str, Any]]:
        """The next message; None when none came within `timeout`. Raises EOFError when the process ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._msg_r], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self._msg_r, 65536)
            if not chunk:
                raise EOFError("the Node.js process ended")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self._req_w)
        os.close(self._msg_r)


class NodeKernel(Kernel):
    implementation = "paddock-node"
    implementation_version = "1.0"
    banner = "Paddock's Node.js kernel"
    language = "javascript"
    language_version = "1"
    language_info = {"name": "javascript", "mimetype": "text/javascript", "file_extension": ".js"}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.language = LANGUAGE
        if LANGUAGE == "typescript":
            self.language_info = {"name": "typescript", "mimetype": "text/typescript", "file_extension": ".ts"}
        self.node = NodeProcess(LANGUAGE)

    def _stream(self, name: str, text: str, silent: bool) -> None:
        if not silent:
            self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **kwargs):  # type: ignore[override]
        cell_id = uuid.uuid4().hex
        self.node.send({"id": cell_id, "code": code})
        done = None
        interrupted_at: Optional[float] = None
        while done is None:
            try:
                timeout = None if interrupted_at is None else max(0.0, interrupted_at + INTERRUPT_GRACE_S - time.monotonic())
                msg = self.node.read(timeout)
                if msg is None:
                    # Interrupted and still not ended: a new process takes its place.
                    self.node.close()
                    self.node = NodeProcess(LANGUAGE)
                    done = {"error": {"name": "KeyboardInterrupt", "value": "the cell did not stop; its context was started anew", "traceback": ""}}
                elif msg.get("t") == "done" and msg.get("id") == cell_id:
                    done = msg
                elif msg.get("t") in ("stdout", "stderr"):
                    self._stream(msg["t"], msg["text"], silent)
            except KeyboardInterrupt:
                # The runner got the same SIGINT; it answers with the cell's end.
                interrupted_at = time.monotonic()
            except EOFError as err:
                self.node = NodeProcess(LANGUAGE)
                done = {"error": {"name": "ProcessExited", "value": f"{err}; its context was started anew", "traceback": ""}}
        if "error" in done:
            e = done["error"]
            if not silent:
                self.send_response(self.iopub_socket, "error", {"ename": e["name"], "evalue": e["value"], "traceback": [e["traceback"]]})
            return {"status": "error", "execution_count": self.execution_count, "ename": e["name"], "evalue": e["value"], "traceback": [e["traceback"]]}
        if "result" in done and not silent:
            self.send_response(
                self.iopub_socket,
                "execute_result",
                {"execution_count": self.execution_count, "data": {"text/plain": done["result"]}, "metadata": {}},
            )
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}

    def do_shutdown(self, restart):  # type: ignore[override]
        self.node.close()
        return {"status": "ok", "restart": restart}


LANGUAGE = "javascript"

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("javascript", "typescript"):
        LANGUAGE = sys.argv.pop(1)
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(kernel_class=NodeKernel)
