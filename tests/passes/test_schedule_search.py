"""A fixed-seed slice of the random explicit-schedule search (tests/passes/schedule_search.py):
every schedule either lowers and matches numpy on the interpreter, or was rejected at a
primitive call with a fair message; never an error at lowering, a crash, a wrong value, a
slow lowering or an IR repr in a message."""
import schedule_search as search

CASES = 120


def test_schedule_search_slice():
    res = search.search(CASES, seed=0, backend="interp", verbose=False)
    bugs = {k: v for k, v in res.items() if k not in ("ok", "rejected")}
    assert not bugs, "\n\n".join(d for v in bugs.values() for d in v[:3])
    assert len(res.get("ok", [])) >= CASES // 4      # the slice exercises schedules that run
