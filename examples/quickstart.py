"""kdsl in five minutes: the seed-000 row sum in both styles, a custom reducer,
a softmax, and one lowered loop nest.  Run: python3 examples/quickstart.py"""
import numpy as np

import kdsl as kd


@kd.kernel
def rowsum(A):                       # numpy style
    return A.sum(axis=1)


@kd.kernel
def rowsum_te(A):                    # index style: one stage named "B"
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: kd.sum(A[i, k], axis=k), name="B")


product = kd.reducer(lambda x, y: x * y, identity=1, name="product")


@kd.kernel
def rowprod(A):                      # a user-defined commutative reducer
    n, m = A.shape
    k = kd.reduce_axis(m, name="k")
    return kd.compute((n,), lambda i: product(A[i, k], axis=k))


@kd.kernel
def softmax(X):                      # several stages in one kernel
    e = kd.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cross_thread(s):
    """Seed 000's GPU schedule: rfactor + a cross-thread (warp) reduction."""
    B = s["B"]
    ko, ki = B.split(B.reduce_axes[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = B.split(B.axes[0], factor=32)
    B.bind(xo, "blockIdx.x")
    B.bind(xi, "threadIdx.y")
    B.bind(B.reduce_axes[0], "threadIdx.x")
    BF.compute_at(B, B.reduce_axes[0])


rowsum_te.schedule("cuda")(cross_thread)


def main():
    rng = np.random.default_rng(0)
    a = rng.random((4, 6)).astype(np.float32)
    print("backends installed:", kd.backends())
    print("rowsum     ", rowsum(a))
    print("rowsum_te  ", rowsum_te(a))
    print("numpy      ", a.sum(axis=1))
    print("rowprod    ", rowprod(a + 0.5))
    s = softmax(a)
    print("softmax row sums", s.sum(axis=1))
    print()
    print("The seed-000 cross-thread schedule, lowered for the cuda target:")
    print(rowsum_te.lower(kd.TensorSpec(("n", "m"), kd.float32), backend="cuda"))


if __name__ == "__main__":
    main()
