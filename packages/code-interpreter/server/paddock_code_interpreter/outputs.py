"""Jupyter messages as the code-interpreter SDKs read them.

Each line of an ``/execute`` answer is one JSON object whose ``type`` is
``stdout``, ``stderr``, ``result``, ``error`` or ``number_of_executions``.
A result carries the MIME bundle under the SDKs' short names.
"""

from __future__ import annotations

from typing import Any, Optional

# MIME type -> the key the SDKs read it from.
MIME_KEYS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "e2b/data": "data",
    "e2b/chart": "chart",
}


def result(bundle: dict[str, Any], is_main_result: bool) -> dict[str, Any]:
    """A display_data or execute_result bundle as a ``result`` line."""
    out: dict[str, Any] = {"type": "result", "is_main_result": is_main_result}
    extra: dict[str, Any] = {}
    for mime, value in bundle.items():
        key = MIME_KEYS.get(mime)
        if key is None:
            extra[mime] = value
        elif value not in (None, {}, ""):
            out[key] = value
    text = out.get("text")
    # A string's repr is shown without its quotes, as the SDKs expect ('a' -> a).
    if isinstance(text, str) and len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        out["text"] = text[1:-1]
    if extra:
        out["extra"] = extra
    return out


def stream(name: str, text: str, timestamp: Optional[str]) -> dict[str, Any]:
    return {"type": name, "text": text, **({"timestamp": timestamp} if timestamp else {})}


def error(name: str, value: str, traceback: list[str] | str) -> dict[str, Any]:
    tb = traceback if isinstance(traceback, str) else "\n".join(traceback)
    return {"type": "error", "name": name, "value": value, "traceback": tb}


def execution_count(count: int) -> dict[str, Any]:
    return {"type": "number_of_executions", "execution_count": count}
