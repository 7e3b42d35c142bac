"""kdsl's ``dask.sizeof`` entry point, kept outside the ``kdsl`` package on purpose.

Dask runs every installed ``dask.sizeof`` plugin while it is imported; a plugin inside
``kdsl`` would import all of kdsl (~25 ms and its memory) into every Dask process, workers
that never call a kernel included.  This module imports nothing of kdsl or Dask: it only
arranges that, once Dask's tokenizer exists, kernels get their token rule
(``kdsl.dask.tokens.register``) the first time Dask meets an object of the ``kdsl`` module
tree (``normalize_token.register_lazy``), or at once when kdsl is loaded already.
"""
from __future__ import annotations

import sys


def _register() -> None:
    """The rule itself (kdsl is imported by then: Dask met one of its objects)."""
    kernel = sys.modules.get("kdsl.kernel")
    if kernel is not None:
        from kdsl.dask.tokens import register
        register(kernel.Kernel)


def _tokenizer_loaded(module) -> None:
    """Dask's tokenizer module has run: kernels get their rule when Dask first meets one."""
    module.normalize_token.register_lazy("kdsl", _register)


class _AfterTokenizer:
    """A meta path finder waiting for ``dask.tokenize`` (Dask loads its sizeof plugins
    before its tokenizer): it runs ``_tokenizer_loaded`` right after that module, once."""

    def find_spec(self, name, path, target=None):
        if name != "dask.tokenize":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _tokenizer_loaded(module)
        spec.loader.exec_module = exec_module
        return spec


def dask_plugin(sizeof) -> None:
    """The ``dask.sizeof`` entry point, which Dask runs while it is imported (before its
    tokenizer exists): kernels get their token rule as soon as ``dask.tokenize`` has loaded
    (at once where it has, and kdsl too)."""
    tok = sys.modules.get("dask.tokenize")
    if tok is not None and hasattr(tok, "normalize_token"):
        _tokenizer_loaded(tok)
        _register()
    elif not any(isinstance(f, _AfterTokenizer) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTokenizer())
