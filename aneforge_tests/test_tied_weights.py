"""Tied weights (nanoGPT's `lm_head.weight = wte.weight`) through state_dict in both
directions: torch's state_dict loads strictly into aneforge and keeps the tie; torch loads
aneforge's, by af.save -> torch.load and by converted arrays."""
import numpy as np
import pytest
import torch

import aneforge as af


def tiny_gpt(nn):
    """The same tiny GPT-style module in either library (`nn` is torch.nn or aneforge.nn)."""

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc = nn.Linear(d, d)

        def forward(self, x):
            return x + self.fc(self.ln(x)).tanh()

    class GPT(nn.Module):
        def __init__(self, vocab=11, d=8, n_ctx=6):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab, d), wpe=nn.Embedding(n_ctx, d),
                h=nn.ModuleList([Block(d), Block(d)]), ln_f=nn.LayerNorm(d)))
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight      # nanoGPT's weight tying

        def forward(self, idx, pos):
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            return self.lm_head(self.transformer.ln_f(x))

    return GPT()


IDX = np.array([[1, 4, 2, 9, 0, 3]])
POS = np.arange(6)[None]


def _forward_af(m):
    return m(af.tensor(IDX), af.tensor(POS)).numpy().astype(np.float32)


def _forward_torch(m):
    with torch.no_grad():
        return m(torch.tensor(IDX), torch.tensor(POS)).numpy()


def _torch_model():
    torch.manual_seed(0)
    t = tiny_gpt(torch.nn)
    with torch.no_grad():               # fp16-representable weights: both sides hold the same
        for p in t.parameters():
            p.copy_(p.half().float())
    return t


def test_tied_parameter_is_listed_once_and_saved_under_both_names():
    m = tiny_gpt(af.nn)
    t = _torch_model()
    assert m.lm_head.weight is m.transformer.wte.weight
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert len(list(m.parameters())) == len(list(t.parameters()))
    assert [n for n, _ in m.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in t.named_parameters(remove_duplicate=False)]
    assert list(m.state_dict()) == list(t.state_dict())
    assert {"lm_head.weight", "transformer.wte.weight"} <= set(m.state_dict())


def test_torch_state_dict_loads_strictly_and_keeps_the_tie():
    t = _torch_model()
    m = tiny_gpt(af.nn)
    result = m.load_state_dict(t.state_dict())             # strict: both tied keys present
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert m.lm_head.weight is m.transformer.wte.weight
    np.testing.assert_allclose(_forward_af(m), _forward_torch(t), atol=2e-2, rtol=2e-2)
    # a training step moves the one shared tensor, seen under both names
    opt = af.optim.SGD(m.parameters(), lr=0.5)
    m(af.tensor(IDX), af.tensor(POS)).float().pow(2).mean().backward()
    opt.step()
    sd = m.state_dict()
    np.testing.assert_array_equal(sd["lm_head.weight"].numpy(),
                                  sd["transformer.wte.weight"].numpy())
    assert not np.allclose(sd["lm_head.weight"].numpy(), t.lm_head.weight.detach().numpy())


def test_missing_one_tied_key_is_reported_as_torch():
    t = _torch_model()
    sd = t.state_dict()
    del sd["lm_head.weight"]
    with pytest.raises(af.AneforgeError, match="lm_head.weight"):
        tiny_gpt(af.nn).load_state_dict(sd)
    assert tiny_gpt(af.nn).load_state_dict(sd, strict=False).missing_keys == ["lm_head.weight"]
    with pytest.raises(RuntimeError, match="lm_head.weight"):
        tiny_gpt(torch.nn).load_state_dict(sd)


def test_torch_loads_aneforge_state_dict_saved_with_af_save(tmp_path):
    m = tiny_gpt(af.nn)
    path = tmp_path / "gpt.pt"
    af.save(m.state_dict(), str(path))
    t = tiny_gpt(torch.nn)
    t.load_state_dict(torch.load(str(path), weights_only=True))      # strict
    assert t.lm_head.weight is t.transformer.wte.weight
    np.testing.assert_allclose(_forward_torch(t), _forward_af(m), atol=2e-2, rtol=2e-2)


def test_torch_loads_aneforge_state_dict_as_converted_arrays():
    m = tiny_gpt(af.nn)
    t = tiny_gpt(torch.nn)
    t.load_state_dict({k: torch.from_numpy(v.numpy().astype(np.float32))
                       for k, v in m.state_dict().items()})
    assert t.lm_head.weight is t.transformer.wte.weight
    np.testing.assert_allclose(_forward_torch(t), _forward_af(m), atol=2e-2, rtol=2e-2)
