"""How sure a pass rate is: the Wilson score interval of one rate and Newcombe's interval of a difference.

Both are a few lines of arithmetic (no statistics package needed). Wilson's interval stays inside 0–1 and
is honest at the small counts experiments have (3 repeats × a few scenarios): 9/9 passes is 70–100 %,
not "100 %". Two policies' pass rates differ beyond the noise when Newcombe's interval of their difference
(method 10, built from the two Wilson intervals) leaves out zero.

- E. B. Wilson, "Probable inference, the law of succession, and statistical inference", JASA 1927.
- R. G. Newcombe, "Interval estimation for the difference between independent proportions", Statistics in
  Medicine 1998 (method 10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval


@dataclass(frozen=True)
class Interval:
    low: float  # 0–1
    high: float

    @property
    def low_pct(self) -> int:
        return math.floor(100 * self.low)

    @property
    def high_pct(self) -> int:
        return math.ceil(100 * self.high)


def wilson_interval(passes: int, n: int, *, z: float = Z95) -> Interval:
    """The 95 % Wilson score interval of ``passes`` out of ``n`` (0–1 when there are no runs)."""
    if n <= 0:
        return Interval(0.0, 1.0)
    p = passes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


def difference_interval(a: tuple[int, int], b: tuple[int, int], *, z: float = Z95) -> Interval:
    """Newcombe's 95 % interval of pass rate ``a`` minus pass rate ``b``, each given as (passes, n)."""
    p1, p2 = a[0] / a[1], b[0] / b[1]
    one, two = wilson_interval(*a, z=z), wilson_interval(*b, z=z)
    d = p1 - p2
    return Interval(
        d - math.sqrt((p1 - one.low) ** 2 + (two.high - p2) ** 2),
        d + math.sqrt((one.high - p1) ** 2 + (p2 - two.low) ** 2),
    )


def beyond_noise(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether pass rates ``a`` and ``b`` (passes, n) differ beyond the noise: Newcombe's 95 % interval
    of their difference leaves out zero. Never with no runs on one side."""
    if a[1] <= 0 or b[1] <= 0:
        return False
    diff = difference_interval(a, b)
    return diff.low > 0 or diff.high < 0
