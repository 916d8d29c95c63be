"""python3 -m paddock_code_interpreter [--port 49999] [--host 0.0.0.0] [--cwd DIR]

Listens at once; /health answers 200 once the default Python context's kernel
answers, 503 before.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from tornado.httpserver import HTTPServer

from .app import make_app
from .registry import Registry


def main() -> None:
    parser = argparse.ArgumentParser(prog="paddock_code_interpreter", description="Paddock's code-interpreter server")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=49999)
    parser.add_argument("--cwd", default=os.environ.get("HOME") or "/", help="working directory of contexts made without one")
    parser.add_argument("--envd-url", default="http://127.0.0.1:49983", help="envd, for the sandbox's environment variables ('' for none)")
    parser.add_argument("--kernels-dir", default=None, help="where the kernel specs are written (default: a new temporary directory)")
    args = parser.parse_args()
    logging.basicConfig(level=os.environ.get("PADDOCK_CI_LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(serve(args))


async def serve(args: argparse.Namespace) -> None:
    registry = Registry(args.cwd, args.kernels_dir)
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    server = HTTPServer(make_app(registry, ready, args.envd_url or None), idle_connection_timeout=3600)
    server.listen(args.port, args.host)
    logging.getLogger("paddock.code-interpreter").info("listening on %s:%d", args.host, args.port)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await registry.default("python")
        ready.set_result(None)
    except Exception as err:
        ready.set_exception(err)
        logging.getLogger("paddock.code-interpreter").exception("the default Python context did not start")
    await stop.wait()
    server.stop()
    await registry.close()


if __name__ == "__main__":
    main()
