"""`core.kept.Kept`: what a run computes twice is kept only inside its scope, within a byte budget."""

from helpers.core.kept import Kept


def test_kept_holds_values_only_inside_its_scope_and_lets_the_oldest_go():
    k = Kept(max_bytes=10, size=len)
    k.put("a", "xxxx")                                   # outside a scope: nothing is kept
    assert not k.active and k.get("a") is None and len(k) == 0
    with k.scope():
        k.put("a", "xxxx")
        k.put("b", "yyyy")
        assert k.get("a") == "xxxx"                      # now the newest: "b" is the oldest
        k.put("c", "zzzz")                               # 12 bytes > 10: the oldest ("b") goes
        assert "b" not in k and "a" in k and "c" in k
        with k.scope(max_bytes=1):                       # a nested scope starts empty, with its own budget
            k.put("d", "ww")
            assert len(k) == 1 and "a" not in k          # the newest stays (keep_at_least=1)
        assert "a" in k and "d" not in k                 # the outer scope's values come back
    assert not k.active and k.get("a") is None


def test_kept_with_nothing_guaranteed_keeps_nothing_beyond_the_budget():
    k = Kept(max_bytes=3, size=len, keep_at_least=0)
    with k.scope():
        k.put("a", "xxxx")
        assert "a" not in k and not k
