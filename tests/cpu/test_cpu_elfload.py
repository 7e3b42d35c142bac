"""kdsl_cpu.elfload: cached object code mapped without LLVM (issue 26 item 4).  Every kernel the
suite compiles on x86-64 Linux is loaded through it; these cases pin the code models and the
fallback to MCJIT for what it does not handle."""
import ctypes
import math

import pytest

pytest.importorskip("llvmlite")
from kdsl_cpu import elfload, jit  # noqa: E402

pytestmark = pytest.mark.skipif(not elfload.supported(), reason="x86-64 Linux only")

# a constant in .rodata, a global in .data, a libm call, a call between the module's functions
IR = """
@scale = internal global double 3.0
@tab = internal constant [4 x double] [double 1.0, double 2.0, double 4.0, double 8.0]
declare double @exp(double)
define internal double @twice(double %x) noinline {
  %y = fmul double %x, 2.0
  ret double %y
}
define double @kdsl_test_entry(double %x, i64 %i) {
  %p = getelementptr [4 x double], ptr @tab, i64 0, i64 %i
  %t = load double, ptr %p
  %s = load double, ptr @scale
  %e = call double @exp(double %x)
  %w = call double @twice(double %e)
  %a = fmul double %w, %t
  %r = fadd double %a, %s
  %s2 = fadd double %s, 1.0
  store double %s2, ptr @scale
  ret double %r
}
"""


def _object(reloc: str, model: str, ir: str = IR) -> bytes:
    import llvmlite.binding as llvm
    jit._init()
    triple, cpu, features = jit.host()
    tm = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=2, reloc=reloc, codemodel=model)
    mod = llvm.parse_assembly(ir)
    mod.triple = triple
    return bytes(tm.emit_object(mod))


def _check(address):
    f = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int64)(address)
    assert f(0.5, 2) == pytest.approx(math.exp(0.5) * 2 * 4 + 3.0, rel=1e-15)
    assert f(1.0, 3) == pytest.approx(math.exp(1.0) * 2 * 8 + 4.0, rel=1e-15)   # .data written


@pytest.mark.parametrize("model", ["small", "large"])
def test_pic_objects_load_and_run(model):
    code = elfload.load(_object("pic", model), "kdsl_test_entry")
    _check(code.address)


def test_what_it_does_not_handle_goes_to_mcjit():
    # a COMMON symbol (which kdsl's code generator never emits): MCJIT allocates it
    obj = _object("pic", "large", IR.replace("@scale = internal global double 3.0",
                                             "@scale = common global double 0.0")
                  .replace("%r = fadd double %a, %s", "%r = fadd double %a, 3.0")
                  .replace("%s2 = fadd double %s, 1.0", "%s2 = fadd double %s, 0.0"))
    with pytest.raises(elfload.Unsupported, match="COMMON"):
        elfload.load(obj, "kdsl_test_entry")
    code = jit.load_object(obj, "kdsl_test_entry")     # kept: it owns the mapped code
    f = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int64)(code.address)
    assert f(0.5, 2) == pytest.approx(math.exp(0.5) * 2 * 4 + 3.0, rel=1e-15)


def test_a_missing_symbol_is_refused_before_mapping():
    from kdsl.errors import BackendCompileError
    obj = _object("pic", "small").replace(b"exp\0", b"exq\0")
    with pytest.raises(BackendCompileError, match="exq"):
        jit.load_object(obj, "kdsl_test_entry")
    with pytest.raises(elfload.Unsupported, match="exq"):
        elfload.load(obj, "kdsl_test_entry")
