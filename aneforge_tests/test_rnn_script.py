"""The loop of pytorch/examples' word_language_model, run as that script runs it (written here
from its pattern): token ids made with `torch.cat` of each line's tensor, `batchify` (narrow,
view, t(), contiguous), `get_batch` slices of it per step, an LSTM whose hidden state is
carried (detached) from step to step, clip_grad_norm_ and the old `p.data.add_(-lr, p.grad)`.
Against torch step by step, and one compiled program for all its training steps."""
import warnings

import numpy as np
import pytest
import torch

import aneforge as af


def _corpus(lib):
    rng = np.random.default_rng(0)
    lines = [rng.integers(0, 50, rng.integers(4, 12)) for _ in range(60)]
    return lib.cat([lib.tensor(line).type(lib.int64) for line in lines])


def _run(lib, kind, steps=6, bsz=4, bptt=7):
    data = _corpus(lib)
    data = data.narrow(0, 0, data.size(0) // bsz * bsz).view(bsz, -1).t().contiguous()
    lib.manual_seed(0)
    nn = lib.nn
    encoder, rnn, decoder = nn.Embedding(50, 16), getattr(nn, kind)(16, 16, 2), nn.Linear(16, 50)
    params = [*encoder.parameters(), *rnn.parameters(), *decoder.parameters()]
    hidden = (lib.zeros(2, bsz, 16), lib.zeros(2, bsz, 16)) if kind == "LSTM" \
        else lib.zeros(2, bsz, 16)
    losses = []
    for i in range(0, steps * bptt, bptt):
        x, y = data[i:i + bptt], data[i + 1:i + 1 + bptt].reshape(-1)
        hidden = tuple(h.detach() for h in hidden) if kind == "LSTM" else hidden.detach()
        for p in params:
            p.grad = None
        out, hidden = rnn(encoder(x), hidden)
        loss = nn.functional.cross_entropy(decoder(out).view(-1, 50), y)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 0.25)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # (the deprecated overload: both warn)
            for p in params:
                p.data.add_(-2.0, p.grad.data)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_word_language_model_loop_matches_torch_with_one_program(kind):
    before = af.cache_info().misses
    losses = _run(af, kind)
    assert af.cache_info().misses - before == 1         # every step the same program
    np.testing.assert_allclose(losses, _run(torch, kind), rtol=3e-3)


def test_integer_data_is_moved_on_the_host():
    """cat / view / t() / contiguous / slices of integer data in hand: data in hand again."""
    data = _corpus(af)
    batched = data.narrow(0, 0, 200).view(4, -1).t().contiguous()
    for t in (data, batched, batched[3:10], af.stack([data[:5], data[5:10]])):
        assert t.ref[0].data is not None and t.ref[0].op is None
    floats = af.cat([af.ones(3), af.zeros(2)])           # floats record (the crop's gain)
    assert floats.ref[0].data is None
    np.testing.assert_array_equal(batched.numpy(), _corpus(torch).narrow(0, 0, 200).view(
        4, -1).t().contiguous().numpy())


def test_recurrent_final_states_come_with_the_step():
    """The final states a step returns are computed with its loss, so the next step reads
    them as data, not as the previous step's recurrence recorded again."""
    lstm = af.nn.LSTM(4, 8)
    out, (h, c) = lstm(af.ones(5, 2, 4))
    out.sum().item()
    assert h.ref[0].data is not None and c.ref[0].data is not None


def test_the_deprecated_number_first_add_is_torchs():
    x, t = af.ones(3), torch.ones(3)
    with pytest.warns(UserWarning, match="This overload of add_ is deprecated"):
        x.add_(-2.0, af.tensor([1.0, 2.0, 3.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # (torch warns once a process)
        t.add_(-2.0, torch.tensor([1.0, 2.0, 3.0]))
    assert x.tolist() == t.tolist()
    with pytest.warns(UserWarning, match="sub_"):
        x.sub_(0.5, af.tensor([2.0, 2.0, 2.0]))
    assert x.tolist() == [-2.0, -4.0, -6.0]


def test_onnx_export_says_what_aneforge_writes():
    assert af.onnx.is_in_onnx_export() is False
    with pytest.raises(af.AneforgeError, match="no ONNX.*mlpackage.*pte"):
        af.onnx.export(af.nn.Linear(2, 2), (af.ones(1, 2),), "model.onnx")


def test_a_whole_model_saves_and_loads_as_torch_save_model(tmp_path):
    """word_language_model's `torch.save(model, f)` then `torch.load(f, weights_only=False)`:
    the module comes back with its class, tied weights tied, and gives the same outputs; the
    default (weights_only=True) refuses to run its pickle, saying how to."""
    af.manual_seed(0)
    model = af.nn.ModuleDict({"enc": af.nn.Embedding(20, 8), "rnn": af.nn.GRU(8, 8),
                              "dec": af.nn.Linear(8, 20)})
    model["dec"].weight = model["enc"].weight
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        af.save(model, f)
    with pytest.raises(af.CheckpointError, match="weights_only=False.*files you trust"):
        af.load(path)
    with open(path, "rb") as f:
        loaded = af.load(f, weights_only=False)
    loaded["rnn"].flatten_parameters()
    assert type(loaded) is af.nn.ModuleDict and loaded["dec"].weight is loaded["enc"].weight
    assert isinstance(loaded["rnn"].weight_hh_l0, af.nn.Parameter)
    x = af.tensor([[1, 2], [3, 4]])

    def run(m):
        return m["dec"](m["rnn"](m["enc"](x))[0]).numpy()
    np.testing.assert_array_equal(run(loaded), run(model))
