"""tests/cuda_codegen: the cuda backend's code generator (kdsl_cuda.codegen) and NVRTC build,
without a GPU; ``test_codegen_device.py`` runs kernels on a device (mark ``cuda``)."""
import os
import sys

HERE = os.path.dirname(__file__)
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
for p in (ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "backends"),
          os.path.join(ROOT, "tests", "gpu_core")):
    p = os.path.abspath(p)
    if p not in sys.path:
        sys.path.insert(0, p)
