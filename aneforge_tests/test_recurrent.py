"""nn.RNN / LSTM / GRU and their cells against torch: the same parameters after the same seed
(names, order, layout, torch's uniform init), outputs and final states, and the gradients of
the input, the initial states and every weight, for stacked, bidirectional, batch_first,
unbatched and projected (LSTM proj_size) layers."""
import numpy as np
import pytest
import torch

import aneforge as af


def _flat(out):
    return [t for o in out for t in _flat(o)] if isinstance(out, tuple) else [out]


def _pair(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float16)
    return af.tensor(a, requires_grad=True), torch.tensor(a.astype(np.float32),
                                                           requires_grad=True)


def _compare(make, x_shape, state_shapes=()):
    torch.manual_seed(0), af.manual_seed(0)
    tm, am = make(torch.nn), make(af.nn)
    tsd, asd = tm.state_dict(), am.state_dict()
    assert list(tsd) == list(asd)
    for k in tsd:                     # torch's init values, rounded to fp16
        np.testing.assert_allclose(asd[k].numpy(), tsd[k].numpy(), atol=1e-4, err_msg=k)
    ax, tx = _pair(x_shape, 1)
    states = [_pair(s, 2 + i) for i, s in enumerate(state_shapes)]
    if not states:
        hx = thx = None
    elif len(states) == 1:
        hx, thx = states[0]
    else:
        hx, thx = tuple(s[0] for s in states), tuple(s[1] for s in states)
    outs, touts = _flat(am(ax, hx)), _flat(tm(tx, thx))
    assert [tuple(o.shape) for o in outs] == [tuple(t.shape) for t in touts]
    for o, t in zip(outs, touts):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), atol=6e-3, rtol=1e-2)
    sum((o * o).sum() for o in outs).backward()
    sum((t * t).sum() for t in touts).backward()
    leaves = [(ax, tx)] + states + list(zip(am.parameters(), tm.parameters()))
    for a, t in leaves:
        scale = float(np.abs(t.grad.numpy()).max())
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), atol=2e-2 * scale + 1e-4)


CASES = {
    "lstm": (lambda nn: nn.LSTM(8, 16), (5, 3, 8), ()),
    "lstm-2-bi-batch_first": (lambda nn: nn.LSTM(8, 16, num_layers=2, bidirectional=True,
                                                 batch_first=True), (3, 5, 8), ()),
    "lstm-states": (lambda nn: nn.LSTM(8, 16, num_layers=2), (5, 3, 8),
                    ((2, 3, 16), (2, 3, 16))),
    "lstm-proj": (lambda nn: nn.LSTM(8, 16, proj_size=6), (5, 3, 8), ((1, 3, 6), (1, 3, 16))),
    "lstm-unbatched": (lambda nn: nn.LSTM(8, 16, bidirectional=True), (6, 8),
                       ((2, 16), (2, 16))),
    "gru-2": (lambda nn: nn.GRU(8, 16, num_layers=2), (5, 3, 8), ()),
    "gru-bi-unbatched": (lambda nn: nn.GRU(8, 16, bidirectional=True), (6, 8), ()),
    "gru-state-batch_first": (lambda nn: nn.GRU(8, 16, batch_first=True), (3, 5, 8),
                              ((1, 3, 16),)),
    "rnn-relu": (lambda nn: nn.RNN(8, 16, nonlinearity="relu"), (5, 3, 8), ()),
    "rnn-3-nobias": (lambda nn: nn.RNN(8, 16, num_layers=3, bias=False), (5, 3, 8), ()),
    "lstmcell": (lambda nn: nn.LSTMCell(8, 16), (3, 8), ((3, 16), (3, 16))),
    "grucell": (lambda nn: nn.GRUCell(8, 16), (3, 8), ((3, 16),)),
    "rnncell-unbatched": (lambda nn: nn.RNNCell(8, 16, nonlinearity="relu"), (8,), ((16,),)),
}


@pytest.mark.parametrize("case", CASES)
def test_recurrent_layers_match_torch(case):
    _compare(*CASES[case])


def test_cells_without_a_state_start_from_zeros():
    torch.manual_seed(0), af.manual_seed(0)
    for make in (lambda nn: nn.LSTMCell(4, 6), lambda nn: nn.GRUCell(4, 6),
                 lambda nn: nn.RNNCell(4, 6)):
        x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float16)
        torch.manual_seed(0), af.manual_seed(0)
        out, tout = _flat(make(af.nn)(af.tensor(x))), _flat(make(torch.nn)(torch.tensor(
            x.astype(np.float32))))
        for o, t in zip(out, tout):
            np.testing.assert_allclose(o.numpy(), t.detach().numpy(), atol=3e-3)


def test_dropout_between_layers_only_in_training():
    af.manual_seed(0)
    lstm = af.nn.LSTM(4, 8, num_layers=2, dropout=0.5)
    x = af.ones(5, 2, 4)
    a, b = lstm(x)[0].numpy(), lstm(x)[0].numpy()
    assert not np.array_equal(a, b)                        # fresh masks each call
    lstm.eval()
    np.testing.assert_array_equal(lstm(x)[0].numpy(), lstm(x)[0].numpy())
    assert "dropout=0.5" in repr(lstm) and "num_layers=2" in repr(lstm)
    lstm.flatten_parameters()                              # (torch's cuDNN packing: nothing)


def test_a_trained_lstm_loads_into_torch_and_back():
    torch.manual_seed(0), af.manual_seed(0)
    lstm = af.nn.LSTM(4, 8, num_layers=2, bidirectional=True)
    opt = af.optim.Adam(lstm.parameters(), lr=1e-2)
    x = af.tensor(np.random.default_rng(0).standard_normal((6, 3, 4)).astype(np.float16))
    for _ in range(3):
        opt.zero_grad()
        lstm(x)[0].square().mean().backward()
        opt.step()
    tl = torch.nn.LSTM(4, 8, num_layers=2, bidirectional=True)
    tl.load_state_dict({k: torch.tensor(v.numpy().astype(np.float32))
                        for k, v in lstm.state_dict().items()})
    np.testing.assert_allclose(lstm(x)[0].numpy(), tl(torch.tensor(
        x.numpy().astype(np.float32)))[0].detach().numpy(), atol=6e-3)


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="nonlinearity"):
        af.nn.RNN(4, 8, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size"):
        af.nn.LSTM(4, 8, proj_size=8)
    with pytest.raises(ValueError, match="dropout"):
        af.nn.GRU(4, 8, dropout=1.5)
    lstm = af.nn.LSTM(4, 8, num_layers=2)
    with pytest.raises(af.ShapeError, match="input_size. Expected 4, got 5"):
        lstm(af.ones(3, 2, 5))
    with pytest.raises(af.ShapeError, match=r"h0 of shape \(2, 2, 8\), got \(1, 2, 8\)"):
        lstm(af.ones(3, 2, 4), (af.zeros(1, 2, 8), af.zeros(2, 2, 8)))
    with pytest.raises(af.ShapeError, match="2-D .* or 3-D input"):
        lstm(af.ones(3, 2, 4, 1))
