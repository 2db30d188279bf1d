"""Garbage collection of a serving API process (`LOOM_GC_TUNE`, on by default).

After startup a process holds a few hundred thousand long-lived objects (modules, FastAPI's
routes and models, pydantic validators, tiktoken's tables). CPython's collector walks all
of them in every full collection, which the default thresholds (700, 10, 10) start every
~100 young collections, and the hot paths allocate enough to run a young collection every
request or two: under load a full collection landed every second or so and stopped the
event loop for tens of milliseconds, every request in flight then waiting (the p99 at 32
clients was 10x the p50; bench/README.md "The tail"). So, once the app has started:

* `gc.freeze()` moves everything alive into the permanent generation, which no collection
  walks (nothing is freed by it: those objects live as long as the process);
* young collections run every `GEN0` allocations instead of 700 (request garbage is mostly
  freed by reference counting; cycles wait a little longer), and the older generations
  keep their ratios.
"""

from __future__ import annotations

import gc

GEN0 = 20_000
THRESHOLDS = (GEN0, 10, 10)


def tune() -> tuple[int, int, int]:
    """Collect once, freeze what is alive, raise the young threshold; returns the
    thresholds to put back (`untune`)."""
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    return before


def untune(thresholds: tuple[int, int, int]) -> None:
    """When the app stops: the frozen objects become collectable again (a process that
    builds several apps, as the tests do, would otherwise keep every one of them)."""
    gc.unfreeze()
    gc.set_threshold(*thresholds)
