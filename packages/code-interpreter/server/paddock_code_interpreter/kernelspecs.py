"""The Jupyter kernels this server runs, written as kernel specs at start.

Python is ipykernel with a startup file that adds the chart and data
formats (ipykernel makes matplotlib's backend its inline one, which shows
figures as PNG); JavaScript, TypeScript and bash are this package's own kernels
(ipykernel's wrapper-kernel base around node and bash). The specs are made
with absolute paths of this installation, in a directory of their own, so
that kernels installed elsewhere on the machine do not stand in for them.
"""

from __future__ import annotations

import json
import os
import sys

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SERVER_DIR = os.path.dirname(PACKAGE_DIR)
# Where a wrapper kernel keeps its files (the bash kernel's cells): a
# directory of the server's, removed with it.
SCRATCH_VAR = "PADDOCK_KERNEL_SCRATCH"

# Language -> (kernel name, display name).
LANGUAGES = {
    "python": ("paddock-python", "Python 3"),
    "javascript": ("paddock-javascript", "JavaScript (Node.js)"),
    "typescript": ("paddock-typescript", "TypeScript (Node.js)"),
    "bash": ("paddock-bash", "Bash"),
}

ALIASES = {"js": "javascript", "ts": "typescript", "python3": "python", "sh": "bash"}


def normalize_language(language: str | None) -> str:
    if not language:
        return "python"
    lang = language.strip().lower()
    return ALIASES.get(lang, lang)


def _argv(language: str) -> list[str]:
    if language == "python":
        return [
            sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}",
            f"--IPKernelApp.exec_files={os.path.join(PACKAGE_DIR, 'python_startup.py')}",
            # The cells' history is kept in memory (In, Out, _, %history of
            # this session), not in IPython's SQLite file: a sandbox's kernel
            # has no later session to read it, and the file's writer thread,
            # woken after every cell to commit it, held up the cell's answer
            # (about 3 ms of a `1+1` here).
            "--HistoryManager.enabled=False",
        ]
    if language == "bash":
        return [sys.executable, "-Xfrozen_modules=off", "-m", "paddock_code_interpreter.bash_kernel", "-f", "{connection_file}"]
    return [sys.executable, "-Xfrozen_modules=off", "-m", "paddock_code_interpreter.node_kernel", language, "-f", "{connection_file}"]


def write_kernel_specs(root: str, scratch: str) -> str:
    """Writes a kernel spec for each language into `root`; the wrapper kernels keep their files in `scratch`."""
    for language, (name, display) in LANGUAGES.items():
        spec_dir = os.path.join(root, name)
        os.makedirs(spec_dir, exist_ok=True)
        spec = {"argv": _argv(language), "display_name": display, "language": language, "interrupt_mode": "signal"}
        if language != "python":
            # The wrapper kernels import this package; the user's Python kernel is left as it is.
            spec["env"] = {"PYTHONPATH": SERVER_DIR, SCRATCH_VAR: scratch}
        with open(os.path.join(spec_dir, "kernel.json"), "w", encoding="utf-8") as f:
            json.dump(spec, f)
    return root
