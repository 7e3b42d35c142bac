"""LLVM code generation for the cpu backend: loop IR in, LLVM IR text out (pure)."""
from .module import ENTRY_TYPE, Generated, generate, symbol_name

__all__ = ["ENTRY_TYPE", "Generated", "generate", "symbol_name"]
