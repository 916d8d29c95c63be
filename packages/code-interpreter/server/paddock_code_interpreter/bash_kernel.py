"""A Jupyter kernel for bash: ipykernel's kernel base around one bash
process that keeps variables, functions and the working directory between
cells. A cell is a file bash sources; a line with a random marker on stdout
and stderr says where it ended, with its exit status. A nonzero status is the
cell's error (its value the status). An interrupt ends bash and starts a new
one: a non-interactive bash does not survive SIGINT, so its state goes too.

    python3 -m paddock_code_interpreter.bash_kernel -f CONNECTION_FILE
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import uuid
from typing import Any, Optional

from ipykernel.kernelbase import Kernel

from paddock_code_interpreter.kernelspecs import SCRATCH_VAR


class BashProcess:
    def __init__(self, cwd: Optional[str] = None):
        self.dir = tempfile.mkdtemp(prefix="paddock-bash-", dir=os.environ.get(SCRATCH_VAR))
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            # Its own process group: the kernel's interrupt is handled here, not by bash.
            start_new_session=True,
        )

    def run(self, code: str, on_output) -> int:
        """Runs a cell, giving its output to on_output(stream, text) as it comes; its exit status."""
        marker = uuid.uuid4().hex
        path = os.path.join(self.dir, "cell.sh")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code if code.endswith("\n") else code + "\n")
        command = f"source {path}\nprintf '\\n\\036{marker}:%d\\n' $?\nprintf '\\n\\036{marker}\\n' >&2\n"
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode())
        self.proc.stdin.flush()
        streams = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr"}  # type: ignore[union-attr]
        buffers = {"stdout": b"", "stderr": b""}
        ends = {"stdout": f"\n\036{marker}:".encode(), "stderr": f"\n\036{marker}\n".encode()}
        status: Optional[int] = None
        open_streams = set(streams)
        while open_streams:
            ready, _, _ = select.select(list(open_streams), [], [])
            for fd in ready:
                name = streams[fd]
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise EOFError("bash exited")
                buffers[name] += chunk
                buf = buffers[name]
                at = buf.find(ends[name])
                if at >= 0:
                    if at:
                        on_output(name, buf[:at].decode("utf-8", "replace"))
                    if name == "stdout":
                        rest = buf[at + len(ends[name]):]
                        if b"\n" not in rest:
                            # The status digits have not all come yet.
                            continue
                        status = int(rest.split(b"\n", 1)[0])
                    buffers[name] = b""
                    open_streams.discard(fd)
                else:
                    # Keep what could be the start of the marker; pass on the rest.
                    keep = len(ends[name]) + 8
                    if len(buf) > keep:
                        on_output(name, buf[:-keep].decode("utf-8", "replace"))
                        buffers[name] = buf[-keep:]
        return status if status is not None else 1

    def cwd(self) -> Optional[str]:
        try:
            return os.readlink(f"/proc/{self.proc.pid}/cwd")
        except OSError:
            return None

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class BashKernel(Kernel):
    implementation = "paddock-bash"
    implementation_version = "1.0"
    banner = "Paddock's bash kernel"
    language = "bash"
    language_version = "5"
    language_info = {"name": "bash", "mimetype": "text/x-sh", "file_extension": ".sh"}

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.bash = BashProcess()

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False, **kwargs):  # type: ignore[override]
        def on_output(name: str, text: str) -> None:
            if not silent and text:
                self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

        ename = evalue = None
        try:
            status = self.bash.run(code, on_output)
            if status != 0:
                ename, evalue = "", str(status)
        except KeyboardInterrupt:
            cwd = self.bash.cwd()
            self.bash.close()
            self.bash = BashProcess(cwd)
            ename, evalue = "KeyboardInterrupt", "interrupted; bash was started anew"
        except EOFError:
            self.bash.close()
            self.bash = BashProcess()
            ename, evalue = "BashExited", "bash exited; a new one was started"
        if ename is not None:
            if not silent:
                self.send_response(self.iopub_socket, "error", {"ename": ename, "evalue": evalue, "traceback": []})
            return {"status": "error", "execution_count": self.execution_count, "ename": ename, "evalue": evalue, "traceback": []}
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}

    def do_shutdown(self, restart):  # type: ignore[override]
        self.bash.close()
        return {"status": "ok", "restart": restart}


if __name__ == "__main__":
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(kernel_class=BashKernel)
