"""The contexts of one server: made on request, a default one per language."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from typing import Optional

from jupyter_client.kernelspec import KernelSpecManager

from .contexts import Context, ContextError
from .kernelspecs import LANGUAGES, normalize_language, write_kernel_specs


class Registry:
    def __init__(self, default_cwd: str, kernels_dir: Optional[str] = None):
        self.default_cwd = default_cwd
        # The kernel specs and the wrapper kernels' files, in one directory
        # that close() removes (a kernel killed at shutdown cleans nothing).
        self._own_dir = tempfile.mkdtemp(prefix="paddock-kernels-")
        scratch = os.path.join(self._own_dir, "scratch")
        os.mkdir(scratch)
        specs = kernels_dir or os.path.join(self._own_dir, "specs")
        os.makedirs(specs, exist_ok=True)
        self._specs = KernelSpecManager(kernel_dirs=[write_kernel_specs(specs, scratch)])
        self._contexts: dict[str, Context] = {}
        self._defaults: dict[str, str] = {}
        self._default_locks = {language: asyncio.Lock() for language in LANGUAGES}

    def language_of(self, language: Optional[str]) -> str:
        lang = normalize_language(language)
        if lang not in LANGUAGES:
            raise ContextError(400, f"language '{language}' is not supported; supported: {', '.join(LANGUAGES)}")
        return lang

    async def create(self, language: Optional[str], cwd: Optional[str]) -> Context:
        lang = self.language_of(language)
        directory = cwd or self.default_cwd
        if not os.path.isabs(directory):
            raise ContextError(400, f"cwd '{directory}' is not an absolute path")
        if not os.path.isdir(directory):
            raise ContextError(400, f"cwd '{directory}' is not a directory")
        context = Context(lang, directory, self._specs)
        try:
            await context.start()
        except ContextError:
            raise
        except Exception as err:
            raise ContextError(500, f"the {lang} kernel did not start: {err}") from err
        self._contexts[context.id] = context
        return context

    async def default(self, language: Optional[str]) -> Context:
        """The language's default context, started the first time it is asked for."""
        lang = self.language_of(language)
        async with self._default_locks[lang]:
            known = self._defaults.get(lang)
            if known and known in self._contexts:
                return self._contexts[known]
            context = await self.create(lang, None)
            self._defaults[lang] = context.id
            return context

    def get(self, context_id: str) -> Context:
        context = self._contexts.get(context_id)
        if context is None:
            raise ContextError(404, f"context '{context_id}' not found")
        return context

    def list(self) -> list[Context]:
        return list(self._contexts.values())

    async def remove(self, context_id: str) -> None:
        context = self.get(context_id)
        del self._contexts[context_id]
        for lang, known in list(self._defaults.items()):
            if known == context_id:
                del self._defaults[lang]
        await context.shutdown()

    async def close(self) -> None:
        await asyncio.gather(*(c.shutdown() for c in self._contexts.values()), return_exceptions=True)
        self._contexts.clear()
        shutil.rmtree(self._own_dir, ignore_errors=True)
