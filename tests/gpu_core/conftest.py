import os
import sys

HERE = os.path.dirname(__file__)
for p in (os.path.join(HERE, "..", "backends"), os.path.join(HERE, "..")):
    if p not in sys.path:
        sys.path.insert(0, p)
