"""The ``kd.<ufunc>`` names (``kd.float_power``, ``kd.heaviside``...): ``ufuncs.PUBLIC``'s
wrappers, which take Python scalars and numpy values as numpy's ufuncs do.  (kdsl's lazy
``__init__`` resolves these names here rather than in ``ufuncs``, where a helper of the same
name -- ``ufuncs.float_power`` -- expects traced arrays only.)"""
from __future__ import annotations


def __getattr__(name: str):
    from .ufuncs import PUBLIC      # (imported late: ufuncs needs the frontend loaded)
    try:
        return PUBLIC[name]
    except KeyError:
        raise AttributeError(name) from None
