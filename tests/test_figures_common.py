"""The small text helpers of `helpers.figures.common` that figure titles and glued prose use."""

from helpers.figures import common


def test_plural_and_seeds_text():
    assert common.seeds_text(1) == "one seed"
    assert common.seeds_text(3) == "3 seeds"
    assert common.plural(0, "set") == "0 sets"
    assert common.plural(1, "set") == "one set"
    assert common.plural(2, "flipped direction") == "2 flipped directions"
    assert common.plural(1200, "step") == "1,200 steps"
