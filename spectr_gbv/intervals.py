"""The Student-t interval of a mean: the one statistic every table and chart of repeats quotes.

Used by the paper bench (`bench.paper.mean_ci`), the coupled frontier and the trend checks
(`bench.frontier.paired_interval`, on paired differences) and the app's repeat bands
(`components.wiring.runs.mean_band`), so a band in the app and an interval in a results file are
the same computation.
"""

from __future__ import annotations

import math
from typing import Sequence

from scipy import stats


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its Student-t confidence interval. NaN bounds for a
    single value; for identical values (greedy decoding repeats itself) the value itself and a
    band that is the point, not a mean with rounding error."""
    n = len(values)
    if n and all(v == values[0] for v in values):
        value = float(values[0])
        return (value, value, value) if n > 1 else (value, math.nan, math.nan)
    mean = sum(values) / n
    if n < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half
