"""Issue 24, items 4 and 8-12: legal schedules kdsl refused, and the CUDA block limit it did
not check.  Each schedule runs on ``interp-cuda`` (the race- and bounds-checked SIMT
interpreter) or, where it is host-legal, on ``interp``/``cpu``, against numpy in float64."""
import itertools

import numpy as np
import pytest

import kdsl as kd
from kdsl.errors import ScheduleError
from tensor_core_gemms import wgmma64_padded_gemm


def matmul(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r] * B[r, j], axis=r), name="C")


def matmul16(A, B):
    n, k = A.shape
    _, m = B.shape
    r = kd.reduce_axis(k, name="r")
    return kd.compute((n, m), lambda i, j: kd.sum(A[i, r].astype(kd.float32)
                                                  * B[r, j].astype(kd.float32), axis=r), name="C")


def close(got, want, tol=1e-4):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def run_mm(sched, n, k, m, rng, body=matmul, dtype=np.float32, tol=1e-4, **kw):
    kern = kd.kernel(body, **kw)
    kern.schedule("cuda")(sched)
    a = rng.standard_normal((n, k)).astype(dtype)
    b = rng.standard_normal((k, m)).astype(dtype)
    close(kern(a, b, backend="interp-cuda"), a.astype(np.float64) @ b.astype(np.float64), tol)
    return kern


def line_of(err) -> str:
    return err.loc.code.strip() if err.loc is not None and err.loc.code else ""


# ------------------------------------------------------------------ item 8: primitive order
def ladder(order, block=16, bk=4, threads=4, stages=2):
    """The seed-002 ladder's thread-tiling step, its attachments made in ``order`` (names of
    the blocks below), double_buffer() called before compute_at (TVM's tutorial order)."""
    per = block // threads

    def sched(s):
        C = s["C"]
        CL = s.cache_write(C, "local")
        AA, BB = s.cache_read("A", "shared", [CL]), s.cache_read("B", "shared", [CL])
        AL, BL = s.cache_read(AA, "local", [CL]), s.cache_read(BB, "local", [CL])
        by, bx, yi, xi = C.tile(C.axes[0], C.axes[1], block, block)
        ty, yi = C.split(yi, factor=per)
        tx, xi = C.split(xi, factor=per)
        C.reorder(by, bx, ty, tx, yi, xi)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            C.bind(ax, tag)
        CL.compute_at(C, tx)
        ko, ki = CL.split(CL.reduce_axes[0], factor=bk)
        CL.reorder(ko, ki, *CL.axes)

        def shared(X):
            if stages > 1:
                X.double_buffer()
            X.compute_at(CL, ko)
            f = X.fuse(*X.axes)
            _, t = X.split(f, factor=threads * threads)
            y, x = X.split(t, factor=threads)
            X.bind(y, "threadIdx.y")
            X.bind(x, "threadIdx.x")
        steps = {"AA": lambda: shared(AA), "BB": lambda: shared(BB),
                 "AL": lambda: AL.compute_at(CL, ki), "BL": lambda: BL.compute_at(CL, ki)}
        for name in order:
            steps[name]()
    return sched


def test_shared_before_local_tvm_order(rng):
    """TVM's tutorial: AA.compute_at(CL, ko) before AL.compute_at(CL, ki) (was: "its reader
    A.shared.local runs at the root")."""
    for shape in ((20, 19, 18), (16, 8, 16), (1, 5, 3)):
        run_mm(ladder(("AA", "BB", "AL", "BL")), *shape, rng)


def test_every_order_of_the_ladder_lowers_the_same():
    spec = kd.TensorSpec(("n", "k"), kd.float32), kd.TensorSpec(("k", "m"), kd.float32)
    texts = set()
    for order in itertools.permutations(("AA", "BB", "AL", "BL")):
        kern = kd.kernel(matmul)
        kern.schedule("cuda")(ladder(order))
        texts.add(str(kern.lower(*spec, backend="cuda")))
    assert len(texts) == 1


def softmax(X):
    m = X.max(axis=1, keepdims=True)
    e = kd.exp(X - m)
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_producer_attached_before_its_readers(backend, rng):
    """softmax: max attached at the output's row loop before sum, its other reader, is."""
    def sched(s):
        out = s.outputs[0]
        s["max"].compute_at(out, out.axes[0])    # sum still at the root here
        s["sum"].compute_at(out, out.axes[0])
    kern = kd.kernel(softmax)
    kern.schedule(backend)(sched)
    for shape in ((5, 7), (1, 3)):
        x = rng.standard_normal(shape)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        close(kern(x, backend=backend), e / e.sum(axis=1, keepdims=True), 1e-9)


def chain(A):
    T = kd.compute(A.shape, lambda i: A[i] * 2.0, name="T")
    U = kd.compute(A.shape, lambda i: T[i] + 1.0, name="U")
    return kd.compute(A.shape, lambda i: U[i] * U[i], name="V")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compute_at_before_compute_inline(backend, rng):
    def sched(s):
        V = s["V"]
        o, i = V.split(V.axes[0], factor=4)
        s["T"].compute_at(V, o)     # T's reader U runs at the root: fixed by the next line
        s["U"].compute_inline()
    kern = kd.kernel(chain)
    kern.schedule(backend)(sched)
    for size in (10, 1, 0):
        a = rng.standard_normal(size)
        close(kern(a, backend=backend), (a * 2 + 1) ** 2, 1e-9)


def test_illegal_finished_schedule_is_reported_at_the_primitive(rng):
    def sched(s):
        V = s["V"]
        o, i = V.split(V.axes[0], factor=4)
        s["T"].compute_at(V, o)     # and U stays at the root: illegal when finished
    kern = kd.kernel(chain)
    kern.schedule("interp")(sched)
    with pytest.raises(ScheduleError, match="its reader U runs at the root") as ei:
        kern(rng.standard_normal(6), backend="interp")
    assert line_of(ei.value) == 's["T"].compute_at(V, o)     # and U stays at the root: illegal when finished'
    assert ei.value.hint


# ------------------------------------------------------------------ item 9: constant extents
def thread_tiles(stages=2):
    """docs/schedules.md's thread-tiled GEMM."""
    def sched(s):
        C = s["C"]
        CL = s.cache_write(C, "local")
        AA, BB = s.cache_read("A", "shared", [CL]), s.cache_read("B", "shared", [CL])
        by, bx, yi, xi = C.tile(C.axes[0], C.axes[1], 32, 32)
        ty, yi = C.split(yi, factor=4)
        tx, xi = C.split(xi, factor=4)
        C.reorder(by, bx, ty, tx, yi, xi)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            C.bind(ax, tag)
        CL.compute_at(C, tx)
        ko, ki = CL.split(CL.reduce_axes[0], factor=8)
        CL.reorder(ko, ki, *CL.axes)
        for X in (AA, BB):
            X.compute_at(CL, ko)
            o, t = X.split(X.fuse(*X.axes), factor=64)
            y, x = X.split(t, factor=8)
            X.bind(y, "threadIdx.y")
            X.bind(x, "threadIdx.x")
            if stages > 1:
                X.double_buffer()
    return sched


@pytest.mark.parametrize("shape", [(40, 1, 36), (1, 19, 1), (5, 19, 9), (3, 1, 1)])
def test_docs_thread_tiled_gemm_small_dims(shape, rng):
    """K = 1 was refused ("one kernel binds threadIdx.y to loops of 4 iterations ... and 8")."""
    run_mm(thread_tiles(), *shape, rng)


def test_docs_thread_tiled_gemm_specialized(rng):
    run_mm(thread_tiles(1), 20, 8, 12, rng, specialize=True)
    run_mm(thread_tiles(), 6, 1, 40, rng, specialize=True)


def test_tile_of_48_fetched_by_an_8x8_block(rng):
    def sched(s):
        C = s["C"]
        CL = s.cache_write(C, "local")
        AA = s.cache_read("A", "shared", [CL])
        by, bx, ty, tx = C.tile(C.axes[0], C.axes[1], 8, 8)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            C.bind(ax, tag)
        CL.compute_at(C, tx)
        ko, ki = CL.split(CL.reduce_axes[0], factor=6)
        CL.reorder(ko, ki, *CL.axes)
        AA.compute_at(CL, ko)       # an 8 x 6 tile: 48 elements over 64 threads
        o, t = AA.split(AA.fuse(*AA.axes), factor=64)
        y, x = AA.split(t, factor=8)
        AA.bind(y, "threadIdx.y")
        AA.bind(x, "threadIdx.x")
    for shape in ((16, 12, 16), (13, 7, 9), (1, 1, 1)):
        run_mm(sched, *shape, rng)


def docs_wmma(s):
    """docs/schedules.md's tensor-core schedule."""
    w = kd.intrin.wmma(16, 16, 16)
    C = s["C"]
    CF = s.cache_write(C, "wmma.accumulator")
    AF = s.cache_read("A", "wmma.matrix_a", [CF])
    BF = s.cache_read("B", "wmma.matrix_b", [CF])
    bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 32, 32)
    wi, ti = C.split(ii, factor=16)
    wj, tj = C.split(jj, factor=16)
    C.reorder(bi, bj, wi, wj, ti, tj)
    C.bind(bi, "blockIdx.y")
    C.bind(bj, "blockIdx.x")
    C.bind(wi, "threadIdx.z")
    C.bind(wj, "threadIdx.y")
    CF.compute_at(C, wj)
    ci, cj = CF.axes
    ko, ki = CF.split(CF.reduce_axes[0], factor=16)
    CF.reorder(ko, ci, cj, ki)
    AF.compute_at(CF, ko)
    BF.compute_at(CF, ko)
    AF.tensorize(AF.axes[0], w)
    BF.tensorize(BF.axes[0], w)
    CF.tensorize(ci, w)
    C.tensorize(ti, w)


@pytest.mark.parametrize("shape", [(1, 20, 36), (40, 20, 1), (3, 1, 5)])
def test_docs_wmma_small_dims(shape, rng):
    """n = 1 was refused ("the loop under i has extent 1, wmma(16, 16, 16) needs 16")."""
    run_mm(docs_wmma, *shape, rng, body=matmul16, dtype=np.float16, tol=2e-2)


# ------------------------------------------------------------------ item 10: TVM GPU forms
def test_local_stage_attached_outside_the_thread_loops(rng):
    """Each thread computes the whole block tile in its own registers (redundant, correct)."""
    def sched(s):
        C = s["C"]
        CL = s.cache_write(C, "local")
        by, bx, ty, tx = C.tile(C.axes[0], C.axes[1], 4, 4)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            C.bind(ax, tag)
        CL.compute_at(C, bx)
    for shape in ((10, 7, 9), (1, 1, 1)):
        run_mm(sched, *shape, rng)


@pytest.mark.parametrize("backend", ["interp", "interp-cuda"])
def test_fuse_of_one_axis_is_that_axis(backend, rng):
    def sched(s):
        C = s["C"]
        f = C.fuse(C.axes[0])
        assert f is C.axes[0]
        if backend == "interp-cuda":
            o, i = C.split(f, factor=4)
            C.bind(o, "blockIdx.x")
            C.bind(i, "threadIdx.x")
    kern = kd.kernel(matmul)
    kern.schedule("cuda" if backend == "interp-cuda" else backend)(sched)
    a, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    close(kern(a, b, backend=backend), a.astype(np.float64) @ b)


def rowsum2(A):
    k = kd.reduce_axis(A.shape[1], name="k")
    B = kd.compute((A.shape[0],), lambda i: kd.sum(A[i, k], axis=k), name="B")
    return kd.compute((A.shape[0],), lambda i: B[i] * 2.0, name="O")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_store_predicate_on_an_enclosing_stage_loop(backend, rng):
    """A predicate on a loop of the stage it is computed inside (TVM's ``tx.var.equal(0)``)."""
    def sched(s):
        B, O = s["B"], s["O"]
        io, ii = O.split(O.axes[0], factor=4)
        B.compute_at(O, ii)
        B.set_store_predicate(lambda t: t < 4, ii)      # always true: every B is stored
    kern = kd.kernel(rowsum2)
    kern.schedule(backend)(sched)
    a = rng.standard_normal((10, 7))
    close(kern(a, backend=backend), 2 * a.sum(axis=1), 1e-9)


def test_store_predicate_on_a_loop_not_around_the_stage_names_the_form(rng):
    def sched(s):
        B, O = s["B"], s["O"]
        bo, bi = O.split(O.axes[0], factor=4)
        O.bind(bo, "blockIdx.x")
        O.bind(bi, "threadIdx.y")
        B.compute_at(O, bi)
        ko, ki = B.split(B.reduce_axes[0], factor=8)
        B.reorder(ki, ko)
        B.bind(ki, "threadIdx.x")
        O.set_store_predicate(lambda t: t == 0, ki)
    kern = kd.kernel(rowsum2)
    kern.schedule("cuda")(sched)
    with pytest.raises(ScheduleError, match="uses k.inner, a loop of stage B, but O is not computed") as ei:
        kern(rng.standard_normal((5, 9)).astype(np.float32), backend="interp-cuda")
    assert line_of(ei.value) == "O.set_store_predicate(lambda t: t == 0, ki)"
    assert "compute_at" in ei.value.hint


def test_refused_gpu_forms_name_the_form_that_works(rng):
    a, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)

    def block_inside_serial(s):
        C = s["C"]
        io, ii = C.split(C.axes[0], factor=4)
        C.reorder(io, C.axes[1], ii)
        C.bind(C.axes[1], "blockIdx.x")
        C.bind(ii, "threadIdx.x")

    def vthread_symbolic(s):
        C = s["C"]
        C.bind(C.axes[0], "vthread.x")
        jo, ji = C.split(C.axes[1], factor=8)
        C.bind(jo, "blockIdx.x")
        C.bind(ji, "threadIdx.x")
    for sched, hint in ((block_inside_serial, "reorder"), (vthread_symbolic, "nparts")):
        kern = kd.kernel(matmul)
        kern.schedule("cuda")(sched)
        with pytest.raises(ScheduleError) as ei:
            kern(a, b, backend="interp-cuda")
        assert hint in ei.value.hint


# ------------------------------------------------------------------ item 11: argmax rfactor
@pytest.mark.parametrize("fn", [np.argmax, np.argmin])
@pytest.mark.parametrize("shape", [(9, 5), (1, 3), (33, 7)])
def test_argmax_over_columns_with_rfactor_hint(fn, shape, rng):
    op = kd.argmax if fn is np.argmax else kd.argmin
    kern = kd.schedule("cuda", rfactor=4)(kd.kernel(lambda A: op(A, axis=0)))
    a = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(kern(a, backend="interp-cuda"), fn(a, axis=0))


# ------------------------------------------------------------------ item 12: schedule copies
def test_schedule_of_a_kernel_returns_a_copy(rng):
    def split_k(s):
        C = s["C"]
        C.split(C.reduce_axes[0], factor=4)
    kern = kd.kernel(matmul)
    one = kd.schedule("interp", split_k)(kern)
    two = kd.schedule("interp", split_k)(kern)      # was: "axis r was already split"
    assert one is not kern and two is not kern and not kern._hints
    a, b = rng.standard_normal((5, 9)), rng.standard_normal((9, 4))
    for k in (kern, one, two):
        close(k(a, b, backend="interp"), a @ b, 1e-9)
    both = kd.schedule("interp", vectorize=1)(one)  # stacking keeps the earlier schedules
    assert len(both._hints) == 2 and len(one._hints) == 1


# ------------------------------------------------------------------ item 4: block size
def add1(A):
    return kd.compute(A.shape, lambda i: A[i] + 1.0, name="B")


def add2(A):
    return kd.compute(A.shape, lambda i, j: A[i, j] + 1.0, name="B")


def test_bind_of_more_than_1024_threads_is_refused():
    def big(s):
        B = s["B"]
        o, i = B.split(B.axes[0], factor=2048)
        B.bind(o, "blockIdx.x")
        B.bind(i, "threadIdx.x")

    def big2d(s):
        B = s["B"]
        by, bx, ty, tx = B.tile(B.axes[0], B.axes[1], 64, 32)
        B.bind(by, "blockIdx.y")
        B.bind(bx, "blockIdx.x")
        B.bind(ty, "threadIdx.y")
        B.bind(tx, "threadIdx.x")

    def z65(s):
        B = s["B"]
        bz, tz = B.split(B.axes[0], factor=65)
        B.bind(bz, "blockIdx.x")
        B.bind(tz, "threadIdx.z")
    cases = ((add1, big, 'B.bind(i, "threadIdx.x")', np.ones(3000, np.float32)),
             (add2, big2d, 'B.bind(tx, "threadIdx.x")', np.ones((70, 40), np.float32)),
             (add2, z65, 'B.bind(tz, "threadIdx.z")', np.ones((70, 4), np.float32)))
    for (body, sched, line, x), spec in itertools.product(cases, (False, True)):
        # specialize=True: a constant 3000 (or 100) still gets the 2048-thread loop (item 9)
        kern = kd.kernel(body, specialize=spec)
        kern.schedule("cuda")(sched)
        with pytest.raises(ScheduleError, match="more than") as ei:
            kern(x if x.size > 200 or not spec else x[:100], backend="interp-cuda")
        assert line_of(ei.value) == line
        assert "1024" in ei.value.hint


def test_block_of_two_stages_over_1024_threads_is_refused():
    def sched(s):
        C = s["C"]
        AA = s.cache_read("A", "shared", [C])
        by, bx, ty, tx = C.tile(C.axes[0], C.axes[1], 32, 32)
        for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            C.bind(ax, tag)
        AA.compute_at(C, bx)
        y, x = AA.axes
        yo, yi = AA.split(y, factor=64)     # 64 rows of threads: 64 x 32 with C's threadIdx.x
        AA.bind(yi, "threadIdx.y")
    kern = kd.kernel(matmul)
    kern.schedule("cuda")(sched)
    a = np.ones((40, 8), np.float32)
    with pytest.raises(ScheduleError, match="2048 threads") as ei:
        kern(a, a.T.copy(), backend="interp-cuda")
    assert "1024" in ei.value.hint


@pytest.mark.parametrize("threads", [2048, (64, 32), (1, 1, 65)])
def test_threads_hint_over_the_block_limit(threads):
    with pytest.raises(ScheduleError, match="more than a CUDA block holds") as ei:
        kd.schedule("cuda", threads=threads)
    assert "1024" in ei.value.hint
    kern = kd.schedule(None, threads=threads)(kd.kernel(add1))     # every target: cuda refuses
    with pytest.raises(ScheduleError, match="more than a CUDA block holds"):
        kern(np.ones(10, np.float32), backend="interp-cuda")


def padded_wgmma(s):
    """A wgmma(64) GEMM whose operands are padded shared caches fetched by a 4x32 block (the
    GPU-schedule fuzzer's case 24:27): with n < 64 the shared A keeps the tile's 64 rows."""
    wgmma64_padded_gemm(s)


def padded_wmma(s):
    """docs_wmma with the operands staged through padded shared caches (one per block)."""
    w = kd.intrin.wmma(16, 16, 16)
    C = s["C"]
    CF = s.cache_write(C, "wmma.accumulator")
    AS = s.cache_read("A", "shared", [CF], pad=True)
    BS = s.cache_read("B", "shared", [CF], pad=True)
    AF = s.cache_read(AS, "wmma.matrix_a", [CF])
    BF = s.cache_read(BS, "wmma.matrix_b", [CF])
    bi, bj, ii, jj = C.tile(C.axes[0], C.axes[1], 32, 32)
    wi, ti = C.split(ii, factor=16)
    wj, tj = C.split(jj, factor=16)
    C.reorder(bi, bj, wi, wj, ti, tj)
    C.bind(bi, "blockIdx.y")
    C.bind(bj, "blockIdx.x")
    C.bind(wi, "threadIdx.z")
    C.bind(wj, "threadIdx.y")
    CF.compute_at(C, wj)
    ci, cj = CF.axes
    ko, ki = CF.split(CF.reduce_axes[0], factor=16)
    CF.reorder(ko, ci, cj, ki)
    for X in (AS, BS):
        X.compute_at(CF, ko)
        _, t = X.split(X.fuse(*X.axes), factor=32)
        X.bind(t, "threadIdx.x")
    AF.compute_at(CF, ko)
    BF.compute_at(CF, ko)
    AF.tensorize(AF.axes[0], w)
    BF.tensorize(BF.axes[0], w)
    CF.tensorize(ci, w)
    C.tensorize(ti, w)


@pytest.mark.parametrize("sched,shape", [(padded_wgmma, (1, 16, 16)), (padded_wgmma, (3, 80, 20)),
                                         (padded_wmma, (1, 20, 36)), (padded_wmma, (3, 16, 1))])
def test_padded_shared_tile_of_a_tensor_core_past_small_dims(sched, shape, rng):
    """A padded shared cache that a tensorized stage reads keeps the intrinsic's whole tile past
    a small constant n or m (zeros beyond the array): wgmma refused n = 1 ("the shared buffer
    A.shared (A) has 1 rows; wgmma reads shared tiles in atoms of 8 rows")."""
    run_mm(sched, *shape, rng, body=matmul16, dtype=np.float16, tol=2e-2)
