"""The generated procedures: distinct functions, disjoint splits, outputs as their chains."""

import pytest

from iclr_jax.datasets import procedures as P


def test_procedures_are_distinct_and_splits_disjoint():
  procs = P.procedure_set(120, num_train=3, num_test=2, seed=0)
  assert len({p.name for p in procs}) == 120
  assert [len(p.operations) for p in procs[:len(P.OPERATIONS)]] == [1] * len(P.OPERATIONS)
  ops = {op.name: op for op in P.OPERATIONS}
  probes = ["apple river stone", "zebra zebra yak", "candle mirror basket bottle"]
  signatures = set()
  for p in procs:
    chain = tuple(ops[o] for o in p.operations)
    assert not {x for x, _ in p.train} & {x for x, _ in p.test}
    assert all(y == P.apply_chain(chain, x) for x, y in p.train + p.test)
    assert p.query("a b") == f"{p.name}: a b"
    assert p.instruction.count(".") >= len(p.operations)
    signatures.add(tuple(P.apply_chain(chain, x) for x in probes))
  assert len(signatures) >= 115  # distinct on the pool's probes; almost all on these too


def test_operations_by_hand():
  ops = {op.name: op.fn for op in P.OPERATIONS}
  assert ops["caesar 3"]("xyz abc") == "abc def"
  assert ops["rotate 2"]("a b c d") == "c d a b"
  assert ops["dedupe letters"]("letter apple") == "letr aple"
  assert ops["initials"]("green house music") == "ghm"
  assert ops["no vowels"]("queen river") == "qn rvr"
  assert P.apply_chain((P.OPERATIONS[0], P.OPERATIONS[-1]), "ab cd") == "fg de"  # rev words, caesar 3


def test_bad_arguments():
  with pytest.raises(ValueError, match="num must be an int >= 1"):
    P.procedure_set(0, num_train=1, num_test=1)
  with pytest.raises(ValueError, match="exceeds the 21 distinct procedures"):
    P.procedure_set(22, num_train=1, num_test=1, max_ops=1)


def test_compositions_apply_both_steps_and_hold_out_pairs():
  procs = P.procedure_set(8, num_train=1, num_test=1, max_ops=2)
  ops = {op.name: op for op in P.OPERATIONS}
  train, test = P.composition_set(procs, num_train_pairs=30, num_test_pairs=10, num_train=2,
                                  num_test=3, seed=1)
  pairs = [(c.first, c.second) for c in train + test]
  assert len(set(pairs)) == 40 and all(i != j for i, j in pairs)
  assert all(len(c.train) == 2 and not c.test for c in train)
  assert all(len(c.test) == 3 and not c.train for c in test)
  for c in train + test:
    for x, (mid, out) in c.train + c.test:
      first = tuple(ops[o] for o in procs[c.first].operations)
      second = tuple(ops[o] for o in procs[c.second].operations)
      assert mid == P.apply_chain(first, x) and out == P.apply_chain(second, mid)
  c = test[0]
  assert c.query(procs, "a b") == f"{procs[c.first].name} then {procs[c.second].name}: a b"
  again = P.composition_set(procs, num_train_pairs=30, num_test_pairs=10, num_train=2,
                            num_test=3, seed=1)
  assert again == (train, test)


def test_composition_bad_arguments():
  procs = P.procedure_set(3, num_train=1, num_test=1)
  with pytest.raises(ValueError, match="must be <= 6 ordered pairs of 3 procedures"):
    P.composition_set(procs, num_train_pairs=5, num_test_pairs=2, num_train=1, num_test=1)
  with pytest.raises(ValueError, match="num_train and num_test must be >= 1"):
    P.composition_set(procs, num_train_pairs=1, num_test_pairs=1, num_train=0, num_test=1)
