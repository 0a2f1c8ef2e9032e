"""Transformer layers, BatchNorm, Embedding(padding_idx) and KLDivLoss against torch with a
torch state_dict loaded: forward values and every gradient (inputs and parameters)."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
from test_nn import close, data, twin

D, H, FF = 16, 4, 24


def pair(make, *args, **kwargs):
    torch.manual_seed(0)
    return twin(make(nn, *args, **kwargs), make(torch.nn, *args, **kwargs))


def run_both(a, t, inputs, call):
    """call(module, tensors) on both libraries; backward a fixed random cotangent; compare."""
    xa = [af.tensor(x, requires_grad=x.dtype.kind == "f") for x in inputs]
    xt = [torch.tensor(x.astype(np.float32) if x.dtype.kind == "f" else x,
                       requires_grad=x.dtype.kind == "f") for x in inputs]
    ya, yt = call(a, xa, af), call(t, xt, torch)
    close(ya.numpy(), yt, "forward")
    c = np.random.default_rng(7).standard_normal(tuple(yt.shape)).astype(np.float16)
    (ya * af.tensor(c)).sum().backward()
    (yt * torch.tensor(c.astype(np.float32))).sum().backward()
    for i, (p, q) in enumerate(zip(xa, xt)):
        if q.requires_grad:
            close(p.grad.numpy(), q.grad, f"grad of input {i}")
    tparams = dict(t.named_parameters())
    assert [n for n, _ in a.named_parameters()] == list(tparams)
    for name, p in a.named_parameters():
        close(p.grad.numpy(), tparams[name].grad, f"grad of {name}")


def clear_of_relu_kinks(t, make_inputs, call):
    """Inputs (make_inputs(seed)) on which every feed-forward pre-activation is at least 2**-8
    from 0: nearer, fp16 rounding (about 1e-3 here) may flip relu's side, a gradient jump no
    tolerance covers."""
    seen = []
    hooks = [m.register_forward_hook(lambda mod, i, out: seen.append(out.abs().min().item()))
             for name, m in t.named_modules() if name.endswith("linear1")]
    for seed in range(200):
        seen.clear()
        inputs = make_inputs(seed)
        with torch.no_grad():
            call(t, [torch.tensor(x.astype(np.float32) if x.dtype.kind == "f" else x)
                     for x in inputs], torch)
        if min(seen) > 2.0 ** -8:
            break
    for h in hooks:
        h.remove()
    assert min(seen) > 2.0 ** -8, "no seed keeps the pre-activations off relu's kink"
    return inputs


def encoder_layer(m, norm_first=False, activation="relu", batch_first=True):
    return m.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation,
                                     batch_first=batch_first, norm_first=norm_first)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer(norm_first, activation):
    a, t = pair(encoder_layer, norm_first, activation)
    call = lambda m, xs, lib: m(xs[0])  # noqa: E731
    run_both(a, t, clear_of_relu_kinks(t, lambda seed: [data(2, 5, D, seed=seed)], call), call)


def test_encoder_layer_masks_and_sequence_first():
    a, t = pair(encoder_layer, batch_first=False)
    causal = np.triu(np.ones((5, 5), bool), 1)
    padding = np.array([[False] * 5, [False, False, False, True, True]])

    def call(m, xs, lib):
        return m(xs[0], src_mask=lib.tensor(causal), src_key_padding_mask=lib.tensor(padding))
    run_both(a, t, clear_of_relu_kinks(t, lambda seed: [data(5, 2, D, seed=seed)], call), call)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer(norm_first):
    def make(m):
        return m.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True,
                                         norm_first=norm_first)
    a, t = pair(make)
    causal = np.triu(np.ones((3, 3), bool), 1)

    def call(m, xs, lib):
        return m(xs[0], xs[1], tgt_mask=lib.tensor(causal))
    inputs = clear_of_relu_kinks(t, lambda s: [data(2, 3, D, seed=s), data(2, 4, D, seed=s + 50)],
                                 call)
    run_both(a, t, inputs, call)


def test_encoder_stack_with_final_norm_loads_torch_weights():
    def make(m):
        return m.TransformerEncoder(encoder_layer(m), num_layers=2, norm=m.LayerNorm(D),
                                    enable_nested_tensor=False)
    a, t = pair(make)
    assert list(a.state_dict()) == list(t.state_dict())
    assert len(list(a.parameters())) == len(list(t.parameters()))   # each layer its own weights
    assert a.layers[0].linear1.weight is not a.layers[1].linear1.weight
    call = lambda m, xs, lib: m(xs[0])  # noqa: E731
    run_both(a, t, clear_of_relu_kinks(t, lambda seed: [data(2, 5, D, seed=seed)], call), call)


def test_decoder_stack():
    def make(m):
        layer = m.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True)
        return m.TransformerDecoder(layer, num_layers=2)
    a, t = pair(make)
    call = lambda m, xs, lib: m(xs[0], xs[1])  # noqa: E731
    run_both(a, t, clear_of_relu_kinks(
        t, lambda s: [data(2, 3, D, seed=s), data(2, 4, D, seed=s + 50)], call), call)


def test_whole_transformer_with_masks():
    def make(m):
        return m.Transformer(D, H, num_encoder_layers=1, num_decoder_layers=2,
                             dim_feedforward=FF, dropout=0.0, batch_first=True)
    a, t = pair(make)
    assert list(a.state_dict()) == list(t.state_dict())
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(mask.numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(3).numpy())
    padding = np.array([[False] * 4 + [True], [False] * 5])

    def call(m, xs, lib):
        return m(xs[0], xs[1], tgt_mask=lib.nn.Transformer.generate_square_subsequent_mask(3),
                 src_key_padding_mask=lib.tensor(padding),
                 memory_key_padding_mask=lib.tensor(padding))
    inputs = clear_of_relu_kinks(t, lambda s: [data(2, 5, D, seed=s), data(2, 3, D, seed=s + 50)],
                                 call)
    run_both(a, t, inputs, call)


def test_transformer_defaults_and_errors():
    layer = nn.TransformerEncoderLayer(D, H)
    assert layer.linear1.weight.shape == (2048, D) and layer.dropout.p == 0.1
    assert layer.self_attn.dropout == 0.1 and not layer.norm_first
    out = layer(af.ones(3, 2, D))                  # training, with attention dropout
    assert out.shape == (3, 2, D) and np.isfinite(out.numpy()).all()
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(D, H, activation="swish")
    custom = nn.TransformerEncoderLayer(D, H, FF, activation=nn.functional.silu)
    assert custom.activation is nn.functional.silu


def test_attention_dropout_in_training_drops_weights():
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    af.manual_seed(0)
    _, w = mha(af.ones(1, 6, 8), af.ones(1, 6, 8), af.ones(1, 6, 8), average_attn_weights=False)
    w = w.numpy().astype(np.float32)
    assert (w == 0).any() and np.allclose(w[w != 0], 2 / 6, rtol=1e-2)
    mha.eval()
    _, w = mha(af.ones(1, 6, 8), af.ones(1, 6, 8), af.ones(1, 6, 8))
    assert np.allclose(w.numpy().astype(np.float32), 1 / 6, rtol=1e-2)


@pytest.mark.parametrize("make,shape", [(lambda m: m.BatchNorm1d(3), (4, 3)),
                                        (lambda m: m.BatchNorm1d(3, affine=False), (4, 3, 5)),
                                        (lambda m: m.BatchNorm2d(2, momentum=None), (3, 2, 4, 4))])
def test_batch_norm_layers_train_and_eval(make, shape):
    a, t = pair(make)
    assert list(a.state_dict()) == list(t.state_dict())
    if list(a.parameters()):
        run_both(a, t, [data(*shape)], lambda m, xs, lib: m(xs[0]))
    else:
        close(a(af.tensor(data(*shape))).numpy(), t(torch.tensor(data(*shape).astype(np.float32))))
    for name, buf in t.state_dict().items():             # running statistics, as torch updates
        close(a.state_dict()[name].numpy(), buf, name)
    a.eval()
    t.eval()
    run_both(a, t, [data(*shape, seed=3)], lambda m, xs, lib: m(xs[0]))


def test_batch_norm_statistics_run_with_the_training_step():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    opt = af.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(3):
        loss = net(af.tensor(data(8, 3))).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        stats = [net[1].running_mean, net[1].running_var, net[1].num_batches_tracked]
        assert all(t.is_leaf for t in stats)        # computed by the step's program
    assert net[1].num_batches_tracked.item() == 3


def test_batch_norm_statistics_under_af_compile_match_eager():
    def run(compiled):
        af.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
        opt = af.optim.SGD(net.parameters(), lr=0.1)

        def step(x):
            loss = net(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        step = af.compile(step) if compiled else step
        for seed in range(4):
            step(af.tensor(data(8, 3, seed=seed)))
        return {k: v.numpy() for k, v in net.state_dict().items()}
    eager, compiled = run(False), run(True)
    assert compiled["1.num_batches_tracked"] == 4
    for k, v in eager.items():
        np.testing.assert_array_equal(compiled[k], v, err_msg=k)


def test_batch_norm_rejects_wrong_rank():
    with pytest.raises(ValueError, match="BatchNorm2d: expected a 4-D input"):
        nn.BatchNorm2d(3)(af.ones(2, 3))


def test_embedding_padding_idx():
    a, t = pair(lambda m: m.Embedding(6, 4, padding_idx=1))
    assert a.weight.numpy()[1].tolist() == [0.0] * 4
    idx = np.array([[1, 2, 1], [5, 0, 1]], np.int32)
    ya, yt = a(af.tensor(idx)), t(torch.tensor(idx.astype(np.int64)))
    close(ya.numpy(), yt)
    c = data(2, 3, 4, seed=4)
    (ya * af.tensor(c)).sum().backward()
    (yt * torch.tensor(c.astype(np.float32))).sum().backward()
    close(a.weight.grad.numpy(), t.weight.grad, "weight grad")
    assert a.weight.grad.numpy()[1].tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(3, 2, padding_idx=3)


@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_loss_module(reduction, log_target):
    a, t = nn.KLDivLoss(reduction=reduction, log_target=log_target), \
        torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    x = np.log(np.random.default_rng(0).dirichlet(np.ones(5), 4)).astype(np.float16)
    y = np.random.default_rng(1).dirichlet(np.ones(5), 4)
    y = (np.log(y) if log_target else y).astype(np.float16)
    xa = af.tensor(x, requires_grad=True)
    xt = torch.tensor(x.astype(np.float32), requires_grad=True)
    ya, yt = a(xa, af.tensor(y)), t(xt, torch.tensor(y.astype(np.float32)))
    close(ya.numpy(), yt, "forward")
    ya.sum().backward()
    yt.sum().backward()
    close(xa.grad.numpy(), xt.grad, "grad")
