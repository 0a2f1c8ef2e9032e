"""Data from outside arrives intact or is refused: damaged torch checkpoints (each built from a
file `torch.save` wrote, with torch's own verdict as the reference), values fp16 cannot hold
(checkpoints, load_state_dict, from_torch weights, Python constants), declared sizes that
overflow or exceed the machine's memory."""
import io
import pickle
import pickletools
import struct
import warnings
import zipfile

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F


def torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def records(raw: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        return {n: z.read(n) for n in z.namelist()}


def rezip(recs) -> bytes:
    """An archive of (name, bytes) records, each with a correct CRC: damage the zip checks miss."""
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # zipfile: "Duplicate name"
        with zipfile.ZipFile(out, "w") as z:
            for name, data in (recs.items() if isinstance(recs, dict) else recs):
                z.writestr(name, data)
    return out.getvalue()


def int_ops(pkl: bytes) -> list:
    """(start, end) byte spans of the pickle's integer opcodes, in order."""
    ops = list(pickletools.genops(pkl))
    ends = [pos for _, _, pos in ops[1:]] + [len(pkl)]
    return [(pos, end) for (op, _, pos), end in zip(ops, ends)
            if op.name in ("BININT", "BININT1", "BININT2", "LONG1")]


def encode_int(n: int) -> bytes:
    if -2 ** 31 <= n < 2 ** 31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def set_int(pkl: bytes, k: int, value: int) -> bytes:
    """The pickle with its k-th integer opcode replaced by `value` (protocol 2: no frames)."""
    start, end = int_ops(pkl)[k]
    return pkl[:start] + encode_int(value) + pkl[end:]


def with_pickle(raw: bytes, pkl: bytes) -> bytes:
    recs = records(raw)
    recs[next(n for n in recs if n.endswith("data.pkl"))] = pkl
    return rezip(recs)


def data_pkl(raw: bytes) -> bytes:
    recs = records(raw)
    return recs[next(n for n in recs if n.endswith("data.pkl"))]


def both_refuse(raw: bytes, match: str):
    with pytest.raises(Exception):
        torch.load(io.BytesIO(raw), weights_only=True)
    with pytest.raises(af.CheckpointError, match=match):
        af.load(io.BytesIO(raw))


ONE = torch_bytes({"a": torch.tensor([1.0, 2.0, 3.0, 4.0]), "n": torch.arange(3)})
REC0 = "archive/data/0"


def test_short_record_is_refused_not_zero_filled():
    recs = records(ONE)
    recs[REC0] = recs[REC0][:4]
    both_refuse(rezip(recs), "archive/data/0 has 4 bytes where its storage needs 16")


def test_long_record_is_refused():
    recs = records(ONE)
    recs[REC0] += b"\0" * 4
    both_refuse(rezip(recs), "archive/data/0 has 20 bytes where its storage needs 16")


def test_absent_and_duplicated_records():
    recs = records(ONE)
    del recs[REC0]
    both_refuse(rezip(recs), "the record archive/data/0 is absent")
    twice = list(records(ONE).items()) + [(REC0, b"\0" * 16)]
    with pytest.raises(af.CheckpointError, match="appear more than once"):
        af.load(io.BytesIO(rezip(twice)))
    with pytest.raises(af.CheckpointError, match="no data.pkl"):
        af.load(io.BytesIO(rezip({"archive/data/0": b"\0" * 16})))


def test_truncated_and_flipped_files():
    with pytest.raises(af.CheckpointError, match="truncated before its zip directory"):
        af.load(io.BytesIO(ONE[:len(ONE) // 2]))
    info = zipfile.ZipFile(io.BytesIO(ONE)).getinfo(REC0)
    name_len, extra_len = struct.unpack("<HH", ONE[info.header_offset + 26:info.header_offset + 30])
    flipped = bytearray(ONE)
    flipped[info.header_offset + 30 + name_len + extra_len] ^= 0x40     # a byte of tensor a
    changed = torch.load(io.BytesIO(bytes(flipped)), weights_only=True)["a"]
    assert changed.tolist() != [1.0, 2.0, 3.0, 4.0]    # torch does not check the CRC: a changed tensor
    with pytest.raises(af.CheckpointError, match="archive/data/0 cannot be read.*CRC"):
        af.load(io.BytesIO(bytes(flipped)))


def view_checkpoint() -> bytes:
    """A view: torch saves the whole storage (6 elements) with offset 2, size (2,), stride (2,)."""
    return torch_bytes({"v": torch.arange(6.0)[2::2]})


def test_torch_views_load_exactly():
    assert af.load(io.BytesIO(view_checkpoint()))["v"].tolist() == [2.0, 4.0]


@pytest.mark.parametrize("k, value, match", [
    (1, 5, "reach element 7, past the storage's 6 elements"),        # offset
    (2, 4, "reach element 8, past the storage's 6 elements"),        # size
    (3, 3, "reach element 5, past the storage's 6 elements"),         # stride... in bounds
    (2, -1, "not non-negative integers"),
    (2, 2 ** 60, "past the storage"),
    (0, 7, "record archive/data/0 has 24 bytes where its storage needs 28"),   # storage numel
])
def test_views_past_their_storage_are_refused(k, value, match):
    raw = view_checkpoint()
    forged = with_pickle(raw, set_int(data_pkl(raw), k, value))
    if match.startswith("reach element 5"):           # offset 2 + stride 3: element 5 exists
        assert af.load(io.BytesIO(forged))["v"].tolist() == \
            torch.load(io.BytesIO(forged), weights_only=True)["v"].tolist() == [2.0, 5.0]
        return
    both_refuse(forged, match)


def test_sizes_past_int64_and_past_memory_refused_before_allocating():
    """A stride-0 view of one element is a valid torch tensor of any size (what `expand` saves):
    loading it would allocate the whole. Refused by the size checks, before any allocation."""
    raw = torch_bytes({"e": torch.zeros(1).expand(4)})       # numel 1, offset 0, size 4, stride 0
    for size, match in [(2 ** 64, "18446744073709551616 elements.*past int64"),
                        (2 ** 40, "needs 6597069766656 bytes, more than the")]:
        with pytest.raises(af.CheckpointError, match=match):
            af.load(io.BytesIO(with_pickle(raw, set_int(data_pkl(raw), 2, size))))
    assert af.load(io.BytesIO(raw))["e"].tolist() == [0.0] * 4


def test_memory_budget_is_the_simulators(monkeypatch):
    monkeypatch.setenv("ANEFORGE_SIM_MAX_BYTES", "1000")
    with pytest.raises(af.CheckpointError, match="storage 0 needs 1200 bytes, more than the 1000"):
        af.load(io.BytesIO(torch_bytes(torch.zeros(200))))         # 200 float32 + their fp16
    with pytest.raises(af.CheckpointError, match="storage 0 needs 1600 bytes, more than the 1000"):
        af.load(io.BytesIO(torch_bytes(torch.zeros(400))))         # the record itself
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:    # 5000 bytes in ~30
        z.writestr("archive/data.pkl", b"(" * 5000)
    with pytest.raises(af.CheckpointError, match="data.pkl needs 5000 bytes, more than the 1000"):
        af.load(io.BytesIO(bomb.getvalue()))


def test_code_and_damaged_pickles_are_documented_errors(tmp_path):
    evil = torch_bytes({"x": torch.ones(2)})
    for module, name in [("os", "system"), ("builtins", "eval"), ("subprocess", "call")]:
        pkl = (b"\x80\x02c" + f"{module}\n{name}\n".encode() + b"X\x04\x00\x00\x00true\x85R.")
        with pytest.raises(af.CheckpointError, match=f"{module}.{name}.*refusing") as e:
            af.load(io.BytesIO(with_pickle(evil, pkl)))
        assert isinstance(e.value, pickle.UnpicklingError)      # what torch.load raises
    cut = data_pkl(evil)[:-5]
    both_refuse(with_pickle(evil, cut), "does not unpickle")


def test_out_of_range_weights_warn_once_naming_each_tensor():
    raw = torch_bytes({"big": torch.tensor([1e5, -2e5, 1.0]), "tiny": torch.tensor([1e-9, 0.0]),
                       "fine": torch.tensor([65504.0, 2.0 ** -24])})
    with pytest.warns(af.Float16RangeWarning) as seen:
        ck = af.load(io.BytesIO(raw))
    assert len(seen) == 1
    text = str(seen[0].message)
    assert "['big']: 2 finite value(s) past 65504 become +-inf" in text
    assert "['tiny']: 1 nonzero value(s) below 2**-25 become 0" in text
    assert "fine" not in text and "strict_range=True" in text and "rescale" in text
    assert ck["big"].tolist() == [np.inf, -np.inf, 1.0]        # the documented fp16 cast
    with pytest.raises(af.CheckpointError, match="'big'.*nothing was loaded"):
        af.load(io.BytesIO(raw), strict_range=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        af.load(io.BytesIO(torch_bytes({"fine": torch.tensor([65504.0, 2.0 ** -24])})))


def test_load_state_dict_range_and_types_checked_first():
    m = nn.Linear(2, 1)
    m.register_buffer("count", af.tensor([0]))
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    for bad, match in [({"count": np.array([2 ** 40])}, "count: integers.*would wrap"),
                       ({"weight": "abc"}, "weight: a str of dtype <U3 is not numeric")]:
        sd = {"weight": np.ones((1, 2)), "bias": np.ones(1), "count": np.array([1]), **bad}
        with pytest.raises(af.AneforgeError, match=match + ".*nothing was loaded"):
            m.load_state_dict(sd)
        for k, v in m.state_dict().items():
            np.testing.assert_array_equal(v.numpy(), before[k])
    with pytest.warns(af.Float16RangeWarning, match="weight: 1 finite.*bias: 1 nonzero"):
        m.load_state_dict({"weight": torch.tensor([[1e5, 1.0]]), "bias": np.array([1e-9]),
                           "count": np.array([3])})
    assert m.weight.tolist() == [[np.inf, 1.0]] and m.bias.tolist() == [0.0]


def test_host_data_outside_fp16_warns_at_the_users_line():
    """af.tensor / af.from_numpy store floating data as fp16: values it cannot hold warn once,
    with the counts, at the user's line; in-range data (64-bit included) stays silent."""
    with pytest.warns(af.Float16RangeWarning, match="1 finite.*past 65504.*1 nonzero") as seen:
        x = af.tensor([1e5, 1e-9, 3.0])
    assert len(seen) == 1 and seen[0].filename == __file__
    assert x.tolist() == [np.inf, 0.0, 3.0]                   # the documented fp16 cast
    with pytest.warns(af.Float16RangeWarning, match="1 finite") as seen:
        af.from_numpy(np.float32([-7e4]))
    assert seen[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        af.tensor(np.array([65504.0, 2.0 ** -24, 0.0, np.inf]))
        af.tensor([[1, 2]]), af.tensor(np.float16([1e4]))


def test_optimizer_state_outside_fp16_warns_once_naming_each_entry():
    w = nn.Parameter(af.ones(2))
    opt = af.optim.SGD([w], lr=0.1, momentum=0.9)
    (w * w).sum().backward()
    opt.step()
    sd = opt.state_dict()
    sd["state"][0]["momentum_buffer"] = np.float32([1e5, 1e-9])
    with pytest.warns(af.Float16RangeWarning) as seen:
        opt.load_state_dict(sd)
    assert len(seen) == 1 and seen[0].filename == __file__
    assert "SGD.load_state_dict" in str(seen[0].message)
    assert "state[0]['momentum_buffer']: 1 finite value(s) past 65504 become +-inf, 1 nonzero" \
        in str(seen[0].message)
    # torch's Adam state: exp_avg_sq = 1e-8 is below fp16's range, its root (kept) is not
    net = torch.nn.Linear(3, 2)
    topt = torch.optim.Adam(net.parameters())
    net(torch.ones(1, 3)).sum().backward()
    topt.step()
    tsd = topt.state_dict()
    tsd["state"][0]["exp_avg_sq"].fill_(1e-8)
    m = nn.Linear(3, 2)
    aopt = af.optim.Adam(m.parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aopt.load_state_dict(tsd)
    np.testing.assert_allclose(aopt.state[m.weight]["exp_avg_sqrt"].numpy(), 1e-4, rtol=1e-3)


def test_optimizer_load_checks_every_group_before_changing_any():
    a, b = nn.Parameter(af.ones(2)), nn.Parameter(af.ones(2))
    opt = af.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1)
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.5
    sd["param_groups"][1]["lr"] = -1.0                     # the second group is invalid
    with pytest.raises(ValueError, match="Invalid lr value: -1.0"):
        opt.load_state_dict(sd)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.1]
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})


def test_from_torch_weights_out_of_range_warn():
    net = torch.nn.Linear(2, 1)
    with torch.no_grad():
        net.weight[0, 0] = 1e5
    with pytest.warns(af.Float16RangeWarning, match="from_torch.*weight: 1 finite"):
        af.from_torch(net, (torch.ones(1, 2),))


X = [0.0, 1.0, 2.0, 1e-3, -3.0]


def test_python_constants_outside_fp16():
    """mul/div/add/sub keep such numbers exact (scalar_consts); elsewhere a number that becomes
    an infinite fp16 constant warns (torch refuses it in masked_fill, clamp, pow, and computes
    x % c exactly), at the user's line; numbers that only flush to 0 follow torch's own fp16
    cast of a scalar silently."""
    x, t = af.tensor(X), torch.tensor(X, dtype=torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f in (lambda v: v * 1e6, lambda v: v / 1e-9, lambda v: v + 1e6, lambda v: v + 1e-9,
                  lambda v: v * 1e-9, lambda v: 1e6 - v, lambda v: v.clamp(min=1e-9)):
            np.testing.assert_array_equal(f(x).numpy(), f(t).numpy())
    for f in (lambda v: v % 1e6, lambda v: v.masked_fill(v > 1, -1e9), lambda v: v ** 1e6,
              lambda v: v.clamp_min(-1e9)):
        with pytest.warns(af.Float16RangeWarning, match="past float16's range") as seen:
            f(x)
        assert seen[0].filename == __file__
    with pytest.warns(af.Float16RangeWarning, match="compute in float32"):
        x % 1e6
    np.testing.assert_array_equal((x.float() % 1e6).half().numpy(),    # the advice works
                                  (t.float() % 1e6).half().numpy())


def test_a_creation_too_large_for_memory_is_refused_before_allocating():
    with pytest.raises(af.OutOfMemoryError, match=r"af.zeros: shape \(65536, 65536, 65536\).*GiB"):
        af.zeros(65536, 65536, 65536)
    with pytest.raises(af.OutOfMemoryError, match="af.full"):
        af.full((65536, 65536, 4096), 1.0)
    assert af.ones(1, 1, 1, 1, 1, 1).shape == (1,) * 6    # rank 6 is kept as rank <= 5


# ---- datasets past 65536 on an axis: host data ------------------------------------------------
def test_a_corpus_past_65536_tokens_is_host_data_batches_index_out_of():
    """karpathy's gpt.py: the whole tokenized text as one tensor, split, and batches sliced out
    of it with tensor offsets: numpy does the indexing; what comes out is an ordinary tensor."""
    text = np.random.default_rng(0).integers(0, 65, 200_000)
    data = af.tensor(text, dtype=af.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    assert data.shape == (200_000,) and train.shape == (n,) and val.shape == (200_000 - n,)
    af.manual_seed(0)
    ix = af.randint(len(train) - 8, (4,))
    x = af.stack([train[i:i + 8] for i in ix])
    y = af.stack([train[i + 1:i + 9] for i in ix])
    starts = ix.numpy()
    np.testing.assert_array_equal(x.numpy(), np.stack([text[s:s + 8] for s in starts]))
    np.testing.assert_array_equal(y.numpy(), np.stack([text[s + 1:s + 9] for s in starts]))
    assert data.max().item() == text.max() and (data == 3).sum().item() == (text == 3).sum()


def test_a_whole_split_evaluates_under_no_grad_with_the_programs_bits():
    """makemore's split_loss: `emb = C[X]` over every row, then the MLP, under no_grad: each
    op runs on the host by the simulator's own kernel, so rows agree bit for bit with the same
    rows run as a program."""
    rng = np.random.default_rng(1)
    X = af.tensor(rng.integers(0, 27, (70_000, 3)))
    C, W = af.tensor(rng.standard_normal((27, 10))), af.tensor(rng.standard_normal((30, 20)) * 0.3)
    with af.no_grad():
        h = (C[X].view(X.shape[0], -1) @ W).tanh()
        rows = (C[X[:512]].view(512, -1) @ W).tanh()
    assert h.shape == (70_000, 20)
    np.testing.assert_array_equal(h[:512].numpy(), rows.numpy())
    C.requires_grad_(True)
    with pytest.raises(af.LimitError, match="past 65536.*needs a gradient.*C\\[X\\[ix\\]\\]"):
        C[X].sum()


def test_a_loss_over_more_samples_than_fp16_counts_matches_torch():
    """cross_entropy's mean over 140616 samples (makemore's training split, evaluated whole
    under no_grad): the kept-sample count is past fp16 as a sum; it read 0 (inf / inf)."""
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((140_616, 27)).astype(np.float16)
    y = rng.integers(0, 27, 140_616)
    with af.no_grad():
        got = F.cross_entropy(af.tensor(logits), af.tensor(y)).item()
    want = float(torch.nn.functional.cross_entropy(torch.tensor(logits.astype(np.float32)),
                                                   torch.tensor(y)))
    assert abs(got - want) < 2e-3 * want
