"""ANE compile targets: each family's chips, caps, op support and the numerics that differ.

Two tables ship inside the package, in `aneforge/hardware/data/`:

- `targets.csv`: one row per ANE compiler target (h11 … h18, t0/t1, m9/m11, u1-u3), its family
  (A13 = M1, A14 = M2, A15 = M3, A16 = M4/M5) and that family's limits;
- `op_catalog.csv`: MIL op x family support: `Y` native, `~` reached another way (decomposed,
  folded, a software fallback), `N` rejected by the ANE compiler.

Both were compiled from the public measurements of the ANEForge research project
(github.com/sbryngelson/ANEForge, MIT) on M1-M5 hardware; each row's note names its source.
Nothing in them was measured by aneforge. `docs/capabilities.md` is generated from them
(`python -m aneforge.docgen.capabilities --write`).

The target in force is a process-wide setting, as numerics and the backend are:

>>> import aneforge as af
>>> af.get_target().family in ("A13", "A14", "A15", "A16")
True
>>> with af.target("M4"):
...     af.get_target().name, af.get_target().spatial_cap
('h16', 65536)
>>> af.is_native("sin", target="M1"), af.is_native("sin", target="M3")
(False, True)

A target you choose (`af.set_target`, `with af.target(...)`, or the `ANEFORGE_TARGET`
environment variable read at import) has its caps enforced when each op is recorded. The
default target (the host's chip on macOS when it can be detected, M1 elsewhere) is what reports,
`af.is_native` and the compile-cache key use, but recording under it checks only the limits
aneforge has always checked, which every family's MIL parser applies (rank <= 5, every axis
1..65536): code that ran before targets existed still runs, and `af.cross_compile_check` says
what M1 (or the host) would reject.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import difflib
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..context import CTX
from ..errors import AneforgeError, LimitError

DATA = Path(__file__).parent / "data"
# op_catalog.csv's column for each family
COLUMNS = {"A13": "M1_A13", "A14": "M2_A14", "A15": "M3_A15", "A16": "M4_M5_A16_A17"}
STATUS = {"Y": "native", "~": "decomposed", "N": "rejected"}
# Chip names -> the compiler target their ANE reports (targets.csv, chips_or_note names M1, M1
# Max, M2, M2 Pro, M3, M4, M5 and M5 Pro; the other variants are placed in their chip's family,
# whose caps and op support they share).
ALIASES = {"M1": "h13", "M1 Pro": "h13", "M1 Max": "h13g", "M1 Ultra": "h13g",
           "M2": "h14", "M2 Pro": "h14g", "M2 Max": "h14g", "M2 Ultra": "h14g",
           "M3": "h15", "M3 Pro": "h15", "M3 Max": "h15", "M3 Ultra": "h15",
           "M4": "h16", "M4 Pro": "h16", "M4 Max": "h16",
           "M5": "h17s", "M5 Pro": "h17s", "M5 Max": "h17s"}
FALLBACK = "h13"      # off macOS: M1, the best-measured chip (and the strictest caps)


# ops whose every result axis is bounded by a cap of its own instead of the channel/spatial
# ones (docs/capabilities.md): a transpose by the transpose extent
CAP_OF_OP = {"transpose": "transpose"}


@dataclass(frozen=True, eq=False)
class Target:
    """One ANE compiler target: its family's caps, weight encodings and numerics.

    Identity is equality (one object per table row), so a Target is a cheap cache key.
    """
    name: str                      # the compiler's name: h13, h14g, h16, h17s, ...
    family: str                    # A13 | A14 | A15 | A16
    chips: str                     # chips, or a note where no chip is named
    spatial_cap: int               # H, W, matmul K, flat widths: every axis but the channel
    channel_cap: int               # axis 1 of a rank-4 tensor
    transpose_cap: int             # the extent a transpose may move (an offset field's width)
    conv_kw_max: int               # conv kernel width (fp16); kernel height has no fixed cap
    reduce_transpose_at: int       # a reduced axis this long takes the transpose route
    weight_streams: tuple          # compressed weight encodings streamed, not folded to fp16
    texture_engine: bool           # resize / crop_resize / affine / resample hardware
    width_slice_clamp: bool | None  # a nonzero last-axis slice offset saturates |x| > 4094
    enforce_caps: bool = True      # False only for the default target (see the module doc)

    @property
    def chip(self) -> str:
        """The chip this target is best known by ("M1"), or its name when it has none."""
        return next((c for c, t in ALIASES.items() if t == self.name), self.name)

    def describe(self) -> str:
        chip = "" if self.chip == self.name else f" ({self.chip})"
        return f"{self.name}{chip}"

    def __repr__(self) -> str:
        default = "; the default: caps reported, not enforced" if not self.enforce_caps else ""
        return (f"Target({self.describe()}, family {self.family}, spatial cap {self.spatial_cap}, "
                f"channel cap {self.channel_cap}, conv kW <= {self.conv_kw_max}{default})")

    def status(self, op: str) -> str:
        """native | decomposed | rejected | unknown (not in the catalog) for MIL op `op`."""
        row = CATALOG.get(op)
        return STATUS[row[COLUMNS[self.family]]] if row else "unknown"

    def axis_kinds(self, shape: tuple, op: str | None = None) -> list[str]:
        """Which cap bounds each axis of a tensor of `shape` that `op` makes: a rank-4 tensor's
        axis 1 is the channel axis, every other axis is spatial, and a transpose is bounded by
        the transpose extent instead (docs/capabilities.md)."""
        kind = CAP_OF_OP.get(op)
        if kind is not None:
            return [kind] * len(shape)
        return ["channel" if len(shape) == 4 and i == 1 else "spatial" for i in range(len(shape))]

    def cap(self, kind: str) -> int:
        return getattr(self, f"{kind}_cap")


def _int(s: str) -> int | None:
    return int(s) if s.strip().isdigit() else None


def _target(row: dict) -> Target:
    clamp = row["width_slice_x16_clamp_4094"].split(" ")[0]
    return Target(row["arch"], row["family"], row["chips_or_note"], _int(row["max_tensor_dim"]),
                  _int(row["channel_extent"]), _int(row["transpose_extent"]),
                  _int(row["conv_kw_max"]), _int(row["reduction_transpose_extent"]),
                  tuple(row["native_weight_streams"].split(";")),
                  row["texture_engine"] == "yes", {"yes": True, "no": False}.get(clamp))


def _read(name: str) -> list[dict]:
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


ROWS = _read("targets.csv")
# Every target MIL can compile for, by name, in the table's order (families A13 -> A16).
TARGETS = {r["arch"]: _target(r) for r in ROWS if r["mil_path_supported"] == "yes"}
UNSUPPORTED = {r["arch"]: r for r in ROWS if r["mil_path_supported"] != "yes"}
CATALOG = {r["op"]: r for r in _read("op_catalog.csv")}


def find(name) -> Target:
    """The Target named by a compiler name ("h13"), a chip ("M1", "m4 pro") or a Target."""
    if isinstance(name, Target):
        return name
    key = str(name).strip()
    chip = {c.lower(): t for c, t in ALIASES.items()}.get(key.lower())
    key = chip or key.lower()
    if key in TARGETS:
        return TARGETS[key]
    if key in UNSUPPORTED:
        row = UNSUPPORTED[key]
        raise AneforgeError(f"target {name!r} ({row['chips_or_note']}) cannot run MIL programs: "
                            f"{row['op_floor_status']}. Choose h13 (M1) or a later target.")
    raise AneforgeError(f"no ANE target {name!r}; choose a chip ({', '.join(ALIASES)}) or a "
                        f"compiler target ({', '.join(TARGETS)})")


def host_target(system: str | None = None, brand: str | None = None) -> Target | None:
    """The target of this machine's ANE: on macOS, from the CPU's brand string ("Apple M2
    Pro"); None elsewhere or when the chip is not one the table knows."""
    if (system or platform.system()) != "Darwin":
        return None
    if brand is None:
        try:
            brand = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], check=True,
                                   capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    m = re.search(r"\b(M\d+)(?: (Pro|Max|Ultra))?\b", brand)
    if not m:
        return None
    name = ALIASES.get(m[0]) or ALIASES.get(m[1])
    return TARGETS[name] if name else None


def _default() -> Target:
    """ANEFORGE_TARGET if set (enforced, as any target you choose); else the host's chip on
    macOS, else M1 -- both reported, not enforced."""
    chosen = os.environ.get("ANEFORGE_TARGET")
    if chosen:
        try:
            return find(chosen)
        except AneforgeError as e:
            raise AneforgeError(f"ANEFORGE_TARGET: {e}") from None
    return dataclasses.replace(host_target() or TARGETS[FALLBACK], enforce_caps=False)


DEFAULT = _default()


# ---- the setting (CTX.target; None: DEFAULT) ------------------------------------------------
def get_target() -> Target:
    """The ANE target programs are checked, keyed and compiled for.

    >>> import aneforge as af
    >>> with af.target("M2"):
    ...     af.get_target().name
    'h14'
    """
    return CTX.target or DEFAULT


def set_target(name=None) -> Target:
    """Choose the ANE target by chip ("M1" ... "M5") or compiler name ("h13" ... "h18"), or
    None for the default; returns the previous one (pass it back to restore it). Ops recorded
    from now on are checked against its caps.

    >>> import aneforge as af
    >>> old = af.set_target("M5")
    >>> af.get_target().name
    'h17s'
    >>> _ = af.set_target(old)
    """
    prev = get_target()
    t = None if name is None else find(name)
    CTX.target = None if t is DEFAULT else t
    return prev


@contextlib.contextmanager
def target(name):
    """Use a target inside a `with` block.

    >>> import aneforge as af
    >>> with af.target("M1"):
    ...     af.zeros(16385)
    Traceback (most recent call last):
    ...
    aneforge.errors.LimitError: tensor: shape (16385,) has axis 0 of size 16385, over the spatial cap ...
    """
    prev = CTX.target
    set_target(name)
    try:
        yield get_target()
    finally:
        CTX.target = prev


def enforced() -> Target | None:
    """The target whose caps recording enforces (None under the default)."""
    t = CTX.target or DEFAULT
    return t if t.enforce_caps else None


# ---- caps ------------------------------------------------------------------------------------
def later_target(size: int, cap_of) -> Target | None:
    """The first target (in family order) whose cap `cap_of(target)` admits `size`."""
    return next((t for t in TARGETS.values() if (cap_of(t) or 0) >= size), None)


def _remedy(size: int, cap_of, what: str) -> str:
    later = later_target(size, cap_of)
    if later is None:
        return ""
    return f"; or choose a later target: af.set_target({later.chip!r}) ({later.name}) allows {what} " \
           f"{cap_of(later)}"


CAP_NAMES = {"spatial": "spatial cap (every axis but a rank-4 tensor's axis 1)",
             "channel": "channel cap (axis 1 of a rank-4 tensor)",
             "transpose": "transpose extent"}


def axis_problems(t: Target, shape: tuple, op: str | None = None) -> list[str]:
    """Why each axis of `shape` (made by `op`) is over `t`'s caps, with the fix; [] if none."""
    out = []
    for i, (n, kind) in enumerate(zip(shape, t.axis_kinds(shape, op))):
        cap = t.cap(kind)
        if n <= cap:
            continue
        tile = f"tile it: split the work along axis {i} into pieces of at most {cap}"
        if kind == "spatial" and len(shape) == 4 and n <= t.channel_cap:
            tile += f", or move this extent to axis 1 (channel cap {t.channel_cap})"
        out.append(f"axis {i} of size {n}, over the {CAP_NAMES[kind]} of {cap} on target "
                   f"{t.describe()}. Fix: {tile}" + _remedy(n, lambda u: u.cap(kind), "axes of"))
    return out


def check_shape(op: str, shape: tuple, where: str = "") -> None:
    """Raise LimitError if the enforced target's caps reject a tensor of `shape` made by `op`."""
    t = enforced()
    if t is None:
        return
    problems = axis_problems(t, shape, op)
    if problems:
        raise LimitError(f"{op}: shape {tuple(shape)}{where} has {problems[0]}")


def kernel_problem(t: Target, kw: int) -> str | None:
    if kw <= t.conv_kw_max:
        return None
    return (f"kernel width {kw}, over the conv kernel-width cap of {t.conv_kw_max} on target "
            f"{t.describe()}. Fix: tile it: split the kernel into column blocks of at most "
            f"{t.conv_kw_max} and add the convs' results"
            + _remedy(kw, lambda u: u.conv_kw_max, "kernel widths up to"))


def check_kernel_width(op: str, kw: int, where: str = "") -> None:
    """Raise LimitError if the enforced target's conv kernel-width cap rejects `kw`."""
    t = enforced()
    problem = None if t is None else kernel_problem(t, kw)
    if problem:
        raise LimitError(f"{op}: weight{where} has {problem}")


def fast_bound() -> int:
    """Every axis up to this passes the enforced target's caps (the recording fast path)."""
    t = enforced()
    return 1 << 62 if t is None else min(t.spatial_cap, t.channel_cap)


# ---- op support ------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpInfo:
    """What the catalog says about one MIL op: its support per family, kernel and notes."""
    name: str
    category: str
    kernel: str
    note: str
    support: dict                  # family (A13 ... A16) -> native | decomposed | rejected

    def __str__(self) -> str:
        fams = ", ".join(f"{f} ({_FAMILY_CHIPS[f]}): {s}" for f, s in self.support.items())
        return f"{self.name} [{self.category}; kernel {self.kernel or '-'}]: {fams}. {self.note}"


_FAMILY_CHIPS = {"A13": "M1", "A14": "M2", "A15": "M3", "A16": "M4/M5"}


def op_info(name: str) -> OpInfo:
    """The catalog's entry for MIL op `name` (support per family, kernel, notes).

    >>> import aneforge as af
    >>> af.op_info("cos").support
    {'A13': 'decomposed', 'A14': 'decomposed', 'A15': 'native', 'A16': 'native'}
    """
    row = CATALOG.get(name)
    if row is None:
        near = difflib.get_close_matches(str(name), CATALOG, n=3)
        raise AneforgeError(f"no MIL op {name!r} in the ANE op catalog"
                            + (f"; did you mean {', '.join(near)}?" if near else ""))
    return OpInfo(name, row["category"], row["kernel"], row["note"],
                  {f: STATUS[row[c]] for f, c in COLUMNS.items()})


def is_native(name: str, target=None) -> bool:
    """Whether the ANE runs MIL op `name` natively on `target` (default: the current one).

    >>> import aneforge as af
    >>> af.is_native("matmul"), af.is_native("topk", target="M1"), af.is_native("topk", target="M2")
    (True, False, True)
    """
    op_info(name)
    return (get_target() if target is None else find(target)).status(name) == "native"


# ---- cross-compile check ---------------------------------------------------------------------
@dataclass(frozen=True)
class CheckRow:
    name: str       # the value the op makes (or the program input)
    op: str         # the MIL op ("input" for a program input)
    status: str     # native | decomposed | rejected | unknown | over a cap
    reason: str


PROBLEMS = ("rejected", "unknown", "over a cap")


@dataclass(frozen=True)
class CrossCheck:
    """`af.cross_compile_check`'s report: one row per op (and per program input over a cap)."""
    target: Target
    rows: tuple

    @property
    def ok(self) -> bool:
        """True when nothing is rejected, unknown or over a cap on the target."""
        return not self.problems

    @property
    def problems(self) -> list[CheckRow]:
        return [r for r in self.rows if r.status in PROBLEMS]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def __str__(self) -> str:
        t = self.target
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items())
        head = (f"cross-compile check for {t.describe()}, family {t.family}: "
                f"{'compiles' if self.ok else 'does NOT compile'}; {counts}")
        w = max([4] + [len(r.name) for r in self.rows])
        lines = [f"  {r.name:<{w}}  {r.op:<16} {r.status:<11} {r.reason}".rstrip() for r in self.rows]
        return "\n".join([head] + lines)

    __repr__ = __str__


def _slice_hazard(t: Target, op) -> str:
    """Pre-A16 families saturate |x| > 4094 in a slice with a nonzero last-axis begin (the
    crop DMA's x16 fixed point; ANEForge `docs/numeric-cliffs.md`)."""
    begin = op.attrs.get("begin")
    if begin is None or not len(begin) or int(begin[-1]) == 0 or t.width_slice_clamp is False:
        return ""
    if op.attrs.get("begin_mask") is not None and op.attrs["begin_mask"][-1]:
        return ""
    measured = "saturates" if t.width_slice_clamp else "may saturate (unmeasured on this family)"
    return (f"hazard: a nonzero begin on the last axis {measured} values with |x| > 4094 to "
            f"+-inf on {t.describe()}; slice another axis or keep values small")


def _row(t: Target, op) -> CheckRow:
    name = op.outputs[0].name if op.outputs else op.name
    problems = [p for v in op.outputs for p in axis_problems(t, v.shape, op.type)]
    if op.type == "conv":
        problems += [p for p in [kernel_problem(t, op.inputs["weight"].shape[3])] if p]
    if problems:
        return CheckRow(name, op.type, "over a cap", "; ".join(problems))
    status = t.status(op.type)
    reason = "not in the ANE op catalog" if status == "unknown" else \
        "" if status == "native" else CATALOG[op.type]["note"]
    if op.type.startswith("slice_by"):
        reason = "; ".join(r for r in (reason, _slice_hazard(t, op)) if r)
    return CheckRow(name, op.type, status, reason)


def cross_compile_check(program, target=None) -> CrossCheck:
    """Check an IR Program op by op against `target` (default: the current one): native,
    decomposed, rejected or over a cap there, with the reason. `af.cross_compile_check` takes
    tensors too."""
    t = get_target() if target is None else find(target)
    rows = [CheckRow(v.name, "input", "over a cap", "; ".join(p))
            for v in program.main.inputs if (p := axis_problems(t, v.shape))]
    rows += [_row(t, op) for op in program.operations]
    return CrossCheck(t, tuple(rows))
