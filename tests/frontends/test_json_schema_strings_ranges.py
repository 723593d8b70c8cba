"""Range arithmetic of the JSON Schema string layer against a brute-force set model."""

from __future__ import annotations

import random

from pda.frontends.json_schema.strings import intersect_ranges, subtract_ranges


def _points(ranges) -> set[int]:  # type: ignore[no-untyped-def]
    return {c for lo, hi in ranges for c in range(lo, hi + 1)}


def _random_ranges(rng: random.Random) -> list[tuple[int, int]]:
    return [(x, x + rng.randint(-2, 6)) for x in (rng.randint(0, 60) for _ in range(rng.randint(0, 6)))]


def test_intersect_and_subtract_match_sets() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        a, b = _random_ranges(rng), _random_ranges(rng)
        got = intersect_ranges(a, b)
        assert _points(got) == _points(a) & _points(b), (a, b)
        assert all(hi + 1 < lo for (_, hi), (lo, _) in zip(got, got[1:])), got  # sorted, merged
        assert _points(subtract_ranges(a, b)) == _points(a) - _points(b), (a, b)
