"""The seed-000 schedules (TVM's reduction tutorial) for a row-sum stage named "B".

Shared by the pass tests (hand-built graphs) and the end-to-end tests (traced kernels).
"""


def split_only(s):
    """Split the reduction by 16 and the rows by 32 (guards where they do not divide)."""
    B = s["B"]
    B.split(B.reduce_axes[0], factor=16)
    B.split(B.axes[0], factor=32)


def bind_rows(s):
    """One GPU thread per row: blockIdx.x x threadIdx.x."""
    B = s["B"]
    xo, xi = B.split(B.axes[0], factor=32)
    B.bind(xo, "blockIdx.x")
    B.bind(xi, "threadIdx.x")


def rfactor_only(s):
    """16 partial sums B.rf, then their sum."""
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    s.rfactor(B, ki)


def cross_thread(s):
    """rfactor + a cross-thread reduction over threadIdx.x, partials computed per thread."""
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = B.split(B.axes[0], factor=32)
    B.bind(xo, "blockIdx.x")
    B.bind(xi, "threadIdx.y")
    B.bind(B.reduce_axes[0], "threadIdx.x")
    BF.compute_at(B, B.reduce_axes[0])


SEED_SCHEDULES = [split_only, bind_rows, rfactor_only, cross_thread]
