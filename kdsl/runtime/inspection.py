"""What ``Kernel.lower()`` and ``Kernel.source()`` look at: the compile request of a kernel for
arguments or specs, on an installed backend or only a target's schedules."""
from __future__ import annotations

import dataclasses

from ..backends import registry as _reg
from ..errors import BackendNotInstalled
from . import foreign
from .dispatch import prepare
from .signature import signature_from_args, signature_from_specs, size_classes


def request_for(kernel, args, backend, lowering_only=False):
    """``(backend, request)`` of ``kernel`` for arguments or specs (``Kernel.lower``/``source``):
    ``lowering_only``: a backend that is not installed gives its target's schedules (TargetOnly)."""
    from ..frontend.spec import ScalarSpec, TensorSpec
    if backend is None:
        backend = _reg.default_backend_name(
            [a for a in args if not isinstance(a, (TensorSpec, ScalarSpec))])
    try:
        be = _reg.get_backend(backend)
    except BackendNotInstalled:
        if not (lowering_only and isinstance(backend, str)):
            raise
        from ..backends.base import TargetOnly
        be = TargetOnly(backend)  # lower() needs only the target's schedules
    if be.spec.device == "host":    # torch/JAX/DLPack arrays: read as numpy
        args = foreign.host_arrays(kernel, args, array_likes=False)[0]
    if len(args) != kernel._nargs:
        kernel._key(args, backend, None)  # raises the count error
    specs = []
    for a, name, const in zip(args, kernel.arg_names, kernel._const):
        if isinstance(a, (TensorSpec, ScalarSpec)):
            specs.append(a)
        else:
            one = signature_from_args((a,), (name,), kernel.constants, kernel.specialize, None)
            specs.extend(one.specs())
    sig = signature_from_specs(specs)
    if be.spec.size_classes:   # concrete arrays: the sizes a call would see
        sig = dataclasses.replace(sig, size_classes=size_classes(args))
    graph = kernel._graph(sig)
    return be, prepare(kernel, be, sig, graph)
