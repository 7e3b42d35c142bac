"""IR nodes cache their structural hash (kdsl.ir.nodes.HASH_ATTR) without changing what a hash,
equality, pickling or the disk-cache fingerprint of a node is."""
import copy
import pickle

from kdsl import dtypes as dt
from kdsl.ir import make as mk
from kdsl.ir import nodes as n
from kdsl.runtime.fingerprint import fingerprint


def _tree():
    i, m = n.Var(dt.index, "i"), n.Var(dt.index, "m")
    e = mk.add(mk.mul(i, n.Const(dt.index, 4)), mk.floordiv(m, n.Const(dt.index, 3)))
    return i, m, n.Compare(dt.bool_, n.CmpOp.LT, e, m)


def test_cached_hash_equals_the_structural_hash():
    i, m, c = _tree()
    h = hash(c)
    assert n.HASH_ATTR in c.__dict__
    assert hash(c) == h
    # an equal tree built separately hashes (and compares) the same
    c2 = _tree()[2]
    assert hash(n.Binary(dt.index, n.BinOp.ADD, i, m)) == hash(n.Binary(dt.index, n.BinOp.ADD, i, m))
    assert c2 != c                      # other Vars: identity-compared
    d = n.Compare(dt.bool_, n.CmpOp.LT, c.a, c.b)
    assert d == c and hash(d) == hash(c)
    assert {c: 1}[d] == 1


def test_the_cache_is_not_pickled_or_copied():
    c = _tree()[2]
    hash(c)
    for other in (pickle.loads(pickle.dumps(c)), copy.copy(c), copy.deepcopy(c)):
        assert n.HASH_ATTR not in other.__dict__
        # unpickled Vars are new objects: the hash must be recomputed, not carried over
        assert hash(other) == hash(n.Compare(dt.bool_, other.op, other.a, other.b))
    s = n.For(n.Var(dt.index, "k"), n.Const(dt.index, 0), n.Const(dt.index, 8), n.ForKind.SERIAL,
              n.Seq(()))
    hash(s)
    assert n.HASH_ATTR not in pickle.loads(pickle.dumps(s)).__dict__


def test_fingerprint_ignores_the_cached_hash():
    c = _tree()[2]
    before = fingerprint(c)
    hash(c)
    hash(c.a)
    assert fingerprint(c) == before
