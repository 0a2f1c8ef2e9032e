"""Every piece of mutable state aneforge keeps, in one object: `CTX`.

Process-wide settings (as torch's defaults are): the random generator, the numerics model, the
ANE target, the backend, the pass pipeline, the compile cache. Per thread (as torch's grad mode is): whether ops
record gradient information, and the gradients `backward()` left pending in this thread. Modules
read and write these fields through their own small API (`af.set_numerics`, `af.no_grad`, ...);
nothing else keeps state in module globals.

This module sits at the bottom of the layers: it imports nothing from aneforge. A setting left
at None means "the owning module's default" (the ANE numerics model, the default pipeline).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
import weakref
from dataclasses import dataclass, field
from typing import Any


class ThreadState(threading.local):
    """State one thread sees on its own: two threads training two models never interfere."""

    def __init__(self):
        self.grad_enabled = True
        self.backward_records: list = []    # autograd.BackwardRecord of gradients still pending
        self.capture = None                 # replay.Capture while af.compile records a call
        self.tracing = False                # af.export tracing a call: its arguments stay inputs
        self.held_hazards = None            # a list while a scaled pass may be rescued (autoscale)
        self.tape = None                    # core/trace.Tape: what was recorded since a realization
        # weakrefs to this thread's written leaves (core/trace.py): another thread's realization
        # must not land one while this thread's cut is reading it
        self.writes: list = []
        # written leaves already pending when the latest backward() ran (autograd.backward):
        # writing one again means a loop that reads nothing (core/trace.py: `stale_write`)
        self.stale_writes = weakref.WeakSet()
        # (weakref to node, index) of values a later step reads, computed with the next
        # realization while their nodes live (core/realization.py `carry`)
        self.carried: list = []


@dataclass
class CompileCache:
    """Compiled programs by structural key, with hit/miss statistics (`af.cache_info()`)."""
    entries: OrderedDict = field(default_factory=OrderedDict)
    hits: int = 0
    misses: int = 0
    compile_seconds: float = 0.0
    limit: int = 256              # entries kept, least recently used dropped first
    evictions: int = 0
    generation: int = 0           # bumped by clear(): captured replays compile anew
    # tape key -> (structure, the tape's leaf numbers the program reads): core/realization.py
    tapes: dict = field(default_factory=dict)
    # prekey -> the walked key its program is cached under: core/realization.py
    aliases: dict = field(default_factory=dict)

    def clear(self) -> None:
        self.generation += 1
        self.entries.clear()
        self.tapes.clear()
        self.aliases.clear()
        self.hits = self.misses = self.evictions = 0
        self.compile_seconds = 0.0


@dataclass
class Context:
    rng: Any = None               # the default af.Generator (aneforge.random.default_generator)
    numerics: Any = None          # numerics.Numerics; None: the ANE model
    target: Any = None            # targets.Target; None: the default (host chip, else M1)
    backend: str = "sim"
    pipeline: Any = None          # passes.Pipeline; None: the default pipeline
    pass_debug: bool = False
    last_report: Any = None       # passes.Report of the latest compile
    cache: CompileCache = field(default_factory=CompileCache)
    recorders: list = field(default_factory=list)   # realization.recording() logs
    budget: Any = None            # core/plan.Budget set by af.plan_budget; None: the target's
    host_notices: set = field(default_factory=set)  # ops whose HostSegmentNotice was said
    explainers: list = field(default_factory=list)  # af.explain's segment logs
    # Objects that take part in every realization (optimizers: a step read early is planned
    # into the same program). Held weakly: dropping an optimizer drops its participation.
    participants: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    thread: ThreadState = field(default_factory=ThreadState)
    realized_seq: int = -1        # trace.SEQ at the latest realization (older plans are stale)
    # automatic gradient scaling (core/autoscale.py): the default scaler (None: made on first
    # use), per-model settings [(parameter handles, scaler or None for off)], and the live
    # modules (parameter names for its warnings)
    auto_scale: Any = None
    model_scales: list = field(default_factory=list)
    modules: weakref.WeakSet = field(default_factory=weakref.WeakSet)


CTX = Context()
