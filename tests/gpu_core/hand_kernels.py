"""A kit of hand-built GPU kernels for the gpu_core tests: NB blocks of NT threads over
global A/O (NB*NT float32) and a shared S (NT); each phase is a function of the block
variable ``b`` returning one statement, and ``kernel(*phases)`` wraps them in the block loop."""
from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n

F32 = dt.float32
NB, NT = 3, 8          # blocks, threads per block


def c(v):
    return n.const(v)


def buf(name, size, scope=n.Scope.GLOBAL, param=False):
    return n.Buffer(name, F32, (c(size),), scope=scope, param=param)


A, O = buf("A", NB * NT, param=True), buf("O", NB * NT, param=True)
S = buf("S", NT, n.Scope.SHARED)


def load(b, i):
    return n.Load(F32, b, (i,))


def tloop(body_fn, extent=NT, name="t"):
    t = n.var(name)
    return n.For(t, c(0), c(extent), n.ForKind.BOUND, body_fn(t), n.ThreadTag.THREAD_X)


def kernel(*phases):
    """for b (blockIdx.x): allocate S (shared): the phases, given b."""
    b = n.var("b")
    body = n.Allocate(S, n.Seq(tuple(p(b) for p in phases)))
    return n.LoweredFunc("hand", (A,), (O,), (), n.For(b, c(0), c(NB), n.ForKind.BOUND, body,
                                                      n.ThreadTag.BLOCK_X))


def fill(b):       # S[t] = A[b*NT + t]
    return tloop(lambda t: n.Store(S, (t,), load(A, mk.add(mk.mul(b, NT), t))))


def reverse(b):    # O[b*NT + t] = S[NT-1 - t]
    return tloop(lambda t: n.Store(O, (mk.add(mk.mul(b, NT), t),), load(S, mk.sub(NT - 1, t))), name="u")


def barrier(b):
    return n.Barrier()
