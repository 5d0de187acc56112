"""Date normalisation: many human date formats -> ISO 8601 (``2026-11-22``).

A small, real sequence-to-sequence task for the full Transformer: the model must find the day,
month and year wherever each format puts them, read month names, and ignore weekdays. Dates are
split once, by a seed, into training and held-out dates: held-out dates never occur in training,
in any format, so held-out accuracy measures generalisation, not memory.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import date, timedelta

from .tokenizers import CharTokenizer

__all__ = ["DATE_FORMATS", "DateTask"]

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _month(d: date) -> str:
    return MONTHS[d.month - 1]


def _weekday(d: date) -> str:
    return WEEKDAYS[d.weekday()]


# English names are spelled out here rather than taken from strftime, which follows the locale.
DATE_FORMATS: dict[str, Callable[[date], str]] = {
    "iso": lambda d: f"{d.year}-{d.month:02d}-{d.day:02d}",  # 2026-11-22
    "us": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",  # 11/22/2026
    "us_short": lambda d: f"{d.month}/{d.day}/{d.year}",  # 11/22/2026, 3/7/2026
    "european": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",  # 22.11.2026
    "compact": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",  # 20261122
    "ymd_slash": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",  # 2026/11/22
    "month_day": lambda d: f"{_month(d)} {d.day}, {d.year}",  # November 22, 2026
    "mon_day": lambda d: f"{_month(d)[:3]} {d.day}, {d.year}",  # Nov 22, 2026
    "day_month": lambda d: f"{d.day} {_month(d)} {d.year}",  # 22 November 2026
    "day_mon": lambda d: f"{d.day} {_month(d)[:3]} {d.year}",  # 22 Nov 2026
    "weekday_day_mon": lambda d: f"{_weekday(d)}, {d.day} {_month(d)[:3]} {d.year}",  # Sunday, 22 Nov 2026
    "wkd_day_mon": lambda d: f"{_weekday(d)[:3]} {d.day} {_month(d)[:3]} {d.year}",  # Sun 22 Nov 2026
    "weekday_month_ordinal": lambda d: f"{_weekday(d)}, {_month(d)} {_ordinal(d.day)}, {d.year}",
    "the_ordinal_of": lambda d: f"the {_ordinal(d.day)} of {_month(d)}, {d.year}",  # the 22nd of November, 2026
    "the_day_of": lambda d: f"the {d.day} of {_month(d)}, {d.year}",  # the 22 of November, 2026
    "dash_mon": lambda d: f"{d.day:02d}-{_month(d)[:3]}-{d.year}",  # 22-Nov-2026
    "upper": lambda d: f"{_month(d).upper()} {d.day}, {d.year}",  # NOVEMBER 22, 2026
    "lower": lambda d: f"{_month(d)[:3].lower()} {d.day} {d.year}",  # nov 22 2026
}


class DateTask:
    """Seeded (human date, ISO date) pairs with a held-out set of dates.

    >>> task = DateTask(seed=0)
    >>> task.render(date(2026, 11, 22), "weekday_day_mon")
    ('Sunday, 22 Nov 2026', '2026-11-22')
    """

    def __init__(
        self,
        seed: int = 0,
        test_fraction: float = 0.1,
        start: date = date(1950, 1, 1),
        end: date = date(2049, 12, 31),
        formats: Sequence[str] | None = None,
    ) -> None:
        self.formats = list(DATE_FORMATS) if formats is None else list(formats)
        unknown = [f for f in self.formats if f not in DATE_FORMATS]
        if unknown or not self.formats:
            raise ValueError(f"unknown date formats {unknown}; choose from {list(DATE_FORMATS)}")
        if not 0 < test_fraction < 1 or end <= start:
            raise ValueError("need 0 < test_fraction < 1 and start < end")
        days = [start + timedelta(n) for n in range((end - start).days + 1)]
        random.Random(seed).shuffle(days)
        n_test = round(len(days) * test_fraction)
        self.test_dates, self.train_dates = sorted(days[:n_test]), sorted(days[n_test:])
        # Every character any format can produce: all months and weekdays occur in a year.
        sample = [start + timedelta(n) for n in range(366)]
        self.src_tokenizer = CharTokenizer.from_texts(DATE_FORMATS[f](d) for f in DATE_FORMATS for d in sample)
        self.tgt_tokenizer = CharTokenizer("0123456789-")

    def render(self, d: date, fmt: str) -> tuple[str, str]:
        """The pair (``d`` written in format ``fmt``, ``d`` in ISO 8601)."""
        return DATE_FORMATS[fmt](d), DATE_FORMATS["iso"](d)

    def pairs(self, n: int, split: str = "train", seed: int = 0, with_formats: bool = False) -> list[tuple[str, ...]]:
        """``n`` (human, ISO) pairs with dates drawn from ``split`` ("train" or "test") and formats at
        random; with ``with_formats``, (human, ISO, format name) triples."""
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test'; got {split!r}")
        pool = self.train_dates if split == "train" else self.test_dates
        rng = random.Random(f"{split}-{seed}")
        out = []
        for _ in range(n):
            d, fmt = rng.choice(pool), rng.choice(self.formats)
            out.append((*self.render(d, fmt), fmt) if with_formats else self.render(d, fmt))
        return out
