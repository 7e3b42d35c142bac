import os
import sys

HERE = os.path.dirname(__file__)
ROOT = os.path.join(HERE, "..", "..")
for p in (ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "backends"),
          os.path.join(ROOT, "tests", "gpu_core")):
    p = os.path.abspath(p)
    if p not in sys.path:
        sys.path.insert(0, p)
