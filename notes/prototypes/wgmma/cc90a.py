"""Compile a .cu to an sm_90a cubin with NVRTC 13.0 (the device's version), via ctypes.
usage: LD_LIBRARY_PATH=/tmp/nvrtc130/nvidia/cu13/lib python3 cc90a.py in.cu out.cubin [-DFOO=1 ...]"""
import ctypes, sys
lib = ctypes.CDLL("/tmp/nvrtc130/nvidia/cu13/lib/libnvrtc.so.13")
def cubin(src: str, name="k.cu", opts=("--gpu-architecture=sm_90a", "-std=c++17")):
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None) == 0
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
    if rc: raise RuntimeError(log.value.decode())
    if log.value.strip(): print(log.value.decode(), file=sys.stderr)
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n)); buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, buf); return buf.raw
if __name__ == "__main__":
    extra = tuple(sys.argv[3:])
    open(sys.argv[2], "wb").write(cubin(open(sys.argv[1]).read(), opts=("--gpu-architecture=sm_90a", "-std=c++17", "--ptxas-options=-v") + extra))
