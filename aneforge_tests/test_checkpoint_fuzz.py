"""The checkpoint reader fuzzed: files `torch.save` wrote, damaged the ways disks, downloads and
attackers damage them, go to `af.load`. Three outcomes are bugs:
- an exception that is not an `AneforgeError` (`af.CheckpointError` for a damaged file);
- silently changed data: `af.load` returns something other than the original, and other than
  what torch itself reads from the same bytes (a record rewritten with a valid CRC is a
  different, valid checkpoint: then aneforge must return torch's values, cast to fp16);
- code execution: forged pickles that would create a file must not.

Seeded and run in full in CI (N_CASES, >= 5000); `ANEFORGE_FUZZ_CASES` changes the count, e.g.
for a longer local run. Each failure names its case number and mutation, so it replays alone."""
import io
import os
import pickletools
import random
import struct
import time
import warnings
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest
import torch

import aneforge as af

SEED = int(os.environ.get("ANEFORGE_FUZZ_SEED", "26"))
N_CASES = int(os.environ.get("ANEFORGE_FUZZ_CASES", "5000"))
TIME_LIMIT_S = 120.0   # a hang guard (a damaged file must never loop), not a speed goal: ~8 s here


def structures() -> dict:
    """Checkpoints of several shapes, as torch writes them (views, shared storages, dtypes)."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    base = torch.arange(12.0).reshape(3, 4)
    mixed = {"t": base.t(), "slice": base[1:, 2:], "shared": base, "half": torch.ones(2).half(),
             "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
             "ints": torch.tensor([1, -2, 3]), "i8": torch.tensor([-3, 4], dtype=torch.int8),
             "u8": torch.tensor([200], dtype=torch.uint8), "mask": torch.tensor([True, False]),
             "scalar": torch.tensor(2.5), "f64": torch.tensor([0.25], dtype=torch.float64),
             "meta": [1, 2 ** 40, -0.5, "name", None, True, (3, "x")]}
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([p], lr=0.01)
    (p * p).sum().backward()
    opt.step()
    return {"mlp": mlp.state_dict(), "mixed": mixed, "optim": opt.state_dict(),
            "tensor": torch.linspace(-1, 1, 5), "list": [torch.ones(2, 2), (torch.zeros(1),)]}


def saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


# ---- comparing what af.load returned with what is expected --------------------------------
def expected(obj):
    """What af.load gives for what torch read: tensors as numpy arrays in aneforge's dtypes."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.is_floating_point():       # rounded once, to nearest (float64 too)
            return (t if t.dtype == torch.float64 else t.float()).numpy().astype(np.float16)
        a = t.numpy()
        if a.dtype == bool:             # a byte other than 0/1 is True: normalized, as torch reads it
            return a.view(np.uint8) != 0
        return a.astype(np.int32) if a.dtype == np.int64 else a     # int64: aneforge's int32
    if isinstance(obj, dict):
        return type(obj)((k, expected(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(expected(v) for v in obj)
    return obj


def differs(got, want, path: str = "") -> str | None:
    """The first path where `got` (from af.load) differs from `want`, None when equal."""
    if isinstance(want, np.ndarray):
        a = got.numpy() if isinstance(got, af.Tensor) else None
        if a is None or a.dtype != want.dtype or a.shape != want.shape:
            return f"{path}: {a!r} for {want!r}"
        nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
        ok = (nan == (np.isnan(want) if a.dtype.kind == "f" else nan)).all() and \
            a[~nan].tobytes() == want[~nan].tobytes()
        return None if ok else f"{path}: {a!r} for {want!r}"
    if isinstance(want, dict):
        if type(got) is not type(want) or list(got) != list(want):
            return f"{path}: {got!r} for {want!r}"
        return next((d for k in want if (d := differs(got[k], want[k], f"{path}[{k!r}]"))), None)
    if isinstance(want, (list, tuple)):
        if type(got) is not type(want) or len(got) != len(want):
            return f"{path}: {got!r} for {want!r}"
        return next((d for i, (g, w) in enumerate(zip(got, want))
                     if (d := differs(g, w, f"{path}[{i}]"))), None)
    if isinstance(want, float) and want != want:
        return None if isinstance(got, float) and got != got else f"{path}: {got!r} for nan"
    return None if type(got) is type(want) and got == want else f"{path}: {got!r} for {want!r}"


# ---- mutations ----------------------------------------------------------------------------
def records(raw: bytes) -> list:
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        return [(n, z.read(n)) for n in z.namelist()]


def rezip(recs) -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # zipfile: "Duplicate name"
        with zipfile.ZipFile(out, "w") as z:
            for name, data in recs:
                z.writestr(name, data)
    return out.getvalue()


def flip(rng, data: bytes, n: int) -> bytes:
    out = bytearray(data)
    for _ in range(n):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def is_pkl(name: str) -> bool:
    return name.endswith("data.pkl")


def with_record(recs, pick, change) -> bytes:
    """The archive with the records `pick` chooses passed through `change` (None drops it)."""
    out = []
    for name, data in recs:
        new = change(name, data) if pick(name) else data
        out += [(name, new)] if new is not None else []
    return rezip(out)


SENTINEL = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"aneforge_fuzz_pwned_{os.getpid()}")
EVIL = [(m, n, f"{c}") for m, n, c in [
    ("os", "system", f"touch {SENTINEL}"), ("posix", "system", f"touch {SENTINEL}"),
    ("builtins", "exec", f"open({SENTINEL!r}, 'w')"), ("builtins", "eval", f"open({SENTINEL!r}, 'w')"),
    ("subprocess", "check_call", f"touch {SENTINEL}"), ("builtins", "open", SENTINEL),
    ("builtins", "getattr", "system"), ("numpy", "load", SENTINEL)]]


def evil_call(rng) -> bytes:
    module, name, arg = rng.choice(EVIL)
    raw = arg.encode()
    return (b"c" + f"{module}\n{name}\n".encode() + b"X" + struct.pack("<I", len(raw)) + raw
            + b"\x85R")


OPCODES = [b"0", b"1", b"(", b"t", b"R", b"b", b"s", b"u", b"e", b"a", b"2", b"h\x00", b"h\x63",
           b"q\x00", b"N", b"\x88", b"\x89", b"K\xff", b"J\xff\xff\xff\x7f", b"\x8a\x09" + b"\xff" * 9,
           b"X\xff\xff\xff\x7f", b"B\x00\x00\x00\x80", b"\x81", b"}", b"]", b")", b"Q", b"\x85",
           b"\x86", b"\x87", b"ctorch._utils\n_rebuild_tensor_v2\n", b"ccollections\nOrderedDict\n",
           b"ctorch\nFloatStorage\n", b"Pstorage\n", b"."]
INTS = [0, 1, -1, 2, 3, 7, 255, 2 ** 15, 2 ** 31 - 1, -2 ** 31, 2 ** 32, 2 ** 40, 2 ** 62,
        2 ** 63, 2 ** 64, -2 ** 63]


def opcode_spans(pkl: bytes) -> list:
    ops = list(pickletools.genops(pkl))
    ends = [pos for _, _, pos in ops[1:]] + [len(pkl)]
    return [(op.name, pos, end) for (op, _, pos), end in zip(ops, ends)]


def forge_int(rng, pkl: bytes) -> bytes:
    spans = [(s, e) for name, s, e in opcode_spans(pkl) if name.startswith(("BININT", "LONG"))]
    start, end = rng.choice(spans)
    n = rng.choice(INTS) + rng.choice((0, 0, 1, -1))
    code = (b"J" + struct.pack("<i", n) if -2 ** 31 <= n < 2 ** 31 else
            b"\x8a" + bytes([(n.bit_length() + 8) // 8]) + n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True))
    return pkl[:start] + code + pkl[end:]


def forge_opcode(rng, pkl: bytes) -> bytes:
    spans = opcode_spans(pkl)
    _, at, end = rng.choice(spans[1:])
    insert = evil_call(rng) if rng.random() < 0.3 else rng.choice(OPCODES)
    if rng.random() < 0.5:                                # replace the opcode, or insert before it
        return pkl[:at] + insert + pkl[end:]
    return pkl[:at] + insert + pkl[at:]


def m_flip_file(rng, raw, recs):
    return flip(rng, raw, rng.randint(1, 4))


def m_truncate_file(rng, raw, recs):
    return raw[:rng.randrange(len(raw))]


def m_drop_record(rng, raw, recs):
    victim = rng.choice(recs)[0]
    return with_record(recs, lambda n: n == victim, lambda n, d: None)


def m_duplicate_record(rng, raw, recs):
    name, data = rng.choice(recs)
    extra = data if rng.random() < 0.5 else flip(rng, data, 1) if data else b"x"
    at = rng.randrange(len(recs) + 1)
    return rezip(recs[:at] + [(name, extra)] + recs[at:])


def m_resize_record(rng, raw, recs):
    data_recs = [n for n, _ in recs if "/data/" in n]
    victim = rng.choice(data_recs)

    def change(n, d):
        k = rng.choice((-8, -4, -2, -1, 1, 2, 4, 8, -len(d)))
        return d[:len(d) + k] if k < 0 else d + bytes(rng.randrange(256) for _ in range(k))
    return with_record(recs, lambda n: n == victim, change)


def m_flip_record(rng, raw, recs):
    """A record's bytes changed and its CRC recomputed: a valid, different file."""
    victim = rng.choice([n for n, d in recs if d])
    return with_record(recs, lambda n: n == victim, lambda n, d: flip(rng, d, rng.randint(1, 3)))


def m_flip_pickle(rng, raw, recs):
    return with_record(recs, is_pkl, lambda n, d: flip(rng, d, rng.randint(1, 3)))


def m_cut_pickle(rng, raw, recs):
    return with_record(recs, is_pkl, lambda n, d: d[:rng.randrange(len(d))])


def m_forge_int(rng, raw, recs):
    return with_record(recs, is_pkl, lambda n, d: forge_int(rng, d))


def m_forge_opcode(rng, raw, recs):
    return with_record(recs, is_pkl, lambda n, d: forge_opcode(rng, d))


MUTATIONS = [m_flip_file, m_truncate_file, m_drop_record, m_duplicate_record, m_resize_record,
             m_flip_record, m_flip_pickle, m_cut_pickle, m_forge_int, m_forge_opcode]


def verdict(raw: bytes, want) -> str:
    """'refused', 'intact' or 'as torch reads it'; raises AssertionError for a bug."""
    try:
        got = af.load(io.BytesIO(raw))
    except af.AneforgeError:
        return "refused"
    if differs(got, want) is None:
        return "intact"
    try:
        ref = expected(torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True))
    except Exception as e:       # torch refuses a file aneforge read as something else
        # (map_location="cpu": aneforge has one device, so a storage's location tag is not read)
        raise AssertionError(f"af.load returned changed data from a file torch refuses ({e})")
    wrong = differs(got, ref)
    assert wrong is None, f"af.load returned data that differs from the original and from torch's: {wrong}"
    return "as torch reads it"


def test_checkpoint_fuzz():
    rng = random.Random(SEED)
    bases = [(name, saved(obj), expected(obj)) for name, obj in structures().items()]
    for name, raw, want in bases:                          # the undamaged files load intact
        assert verdict(raw, want) == "intact", name
    outcomes = Counter()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                    # fp16 range: tested on its own
        for case in range(N_CASES):
            name, raw, want = bases[case % len(bases)]
            mutate = MUTATIONS[(case // len(bases)) % len(MUTATIONS)]
            damaged = mutate(rng, raw, records(raw))
            try:
                outcomes[mutate.__name__, verdict(damaged, want)] += 1
            except Exception as e:
                pytest.fail(f"case {case} ({name}, {mutate.__name__}, seed {SEED}): "
                            f"{type(e).__name__}: {e}")
    elapsed = time.perf_counter() - start
    assert not os.path.exists(SENTINEL), "a forged pickle ran code"
    refused = {m.__name__: outcomes[m.__name__, "refused"] for m in MUTATIONS}
    assert all(refused.values()), refused                  # every mutation is caught sometimes
    assert outcomes["m_flip_record", "as torch reads it"] > 0    # and the oracle is exercised
    assert elapsed < TIME_LIMIT_S, f"{N_CASES} cases took {elapsed:.1f} s"
    print(f"checkpoint fuzz: {N_CASES} cases in {elapsed:.1f} s: {dict(outcomes)}")
