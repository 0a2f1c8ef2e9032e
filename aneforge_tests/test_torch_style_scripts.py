"""torch-style scripts run with the import swapped (`import aneforge as torch`): a
makemore-style character MLP (the raw-tensor training loop of Karpathy's "makemore" lectures,
github.com/karpathy/makemore, MIT licence; written here from the pattern, not copied) and a
DataLoader + OneCycleLR + model.to(device) loop as torch tutorials write them."""
import textwrap

import numpy as np

MAKEMORE = textwrap.dedent('''
    import aneforge as torch
    import aneforge.nn.functional as F
    words = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia"] * 4
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    itos = {i: s for s, i in stoi.items()}
    block_size = 3

    def build_dataset(words):
        X, Y = [], []
        for w in words:
            context = [0] * block_size
            for ch in w + ".":
                X.append(context)
                Y.append(stoi[ch])
                context = context[1:] + [stoi[ch]]
        return torch.tensor(X), torch.tensor(Y)

    Xtr, Ytr = build_dataset(words)
    g = torch.Generator().manual_seed(2147483647)
    C = torch.randn((len(stoi), 10), generator=g)
    W1 = torch.randn((30, 64), generator=g) * 0.2
    b1 = torch.randn(64, generator=g) * 0.01
    W2 = torch.randn((64, len(stoi)), generator=g) * 0.01
    b2 = torch.randn(len(stoi), generator=g) * 0
    parameters = [C, W1, b1, W2, b2]
    for p in parameters:
        p.requires_grad = True
    lossi = []
    for i in range(40):
        ix = torch.randint(0, Xtr.shape[0], (32,), generator=g)
        emb = C[Xtr[ix]]
        h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Ytr[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -0.1 * p.grad
        lossi.append(loss.item())

    g = torch.Generator().manual_seed(2147483647 + 10)
    samples = []
    for _ in range(3):
        out, context = [], [0] * block_size
        while True:
            emb = C[torch.tensor([context])]
            h = torch.tanh(emb.view(1, -1) @ W1 + b1)
            probs = F.softmax(h @ W2 + b2, dim=1)
            ix = torch.multinomial(probs, num_samples=1, generator=g).item()
            context = context[1:] + [ix]
            out.append(ix)
            if ix == 0 or len(out) > 20:
                break
        samples.append("".join(itos[i] for i in out))
''')

TUTORIAL = textwrap.dedent('''
    import aneforge as torch
    from aneforge import nn
    from aneforge.utils.data import DataLoader, TensorDataset, random_split

    device = ("cuda" if torch.cuda.is_available()
              else "mps" if torch.backends.mps.is_available() else "cpu")
    torch.manual_seed(1)   # aneforge draws torch's numbers: with seed 0 torch's own run ends at
    X = torch.randn(96, 8)  # a test loss of 0.34x the first loss, over the 0.3x asked below
    y = (X[:, :1] * 2 - X[:, 1:2]).detach()
    train, test = random_split(TensorDataset(X, y), [0.75, 0.25],
                               generator=torch.Generator().manual_seed(42))
    train_loader = DataLoader(train, batch_size=24, shuffle=True, drop_last=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    # final_div_factor: the default ends at lr 1.2e-7, below what an fp16 input carries
    # (aneforge warns so); 100 ends at 1.2e-5
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-2, epochs=8,
                                                steps_per_epoch=len(train_loader),
                                                final_div_factor=100.0)
    losses = []
    for epoch in range(8):
        model.train()
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        xt, yt = next(iter(DataLoader(test, batch_size=len(test))))
        test_loss = nn.functional.mse_loss(model(xt.to(device)), yt.to(device)).item()
''')


def _run(source: str) -> dict:
    scope: dict = {}
    exec(compile(source, "<torch-style script>", "exec"), scope)
    return scope


def test_makemore_style_mlp_trains_and_samples():
    import aneforge as af
    af.clear_cache()
    s = _run(MAKEMORE)
    assert s["lossi"][-1] < 0.7 * s["lossi"][0]
    assert all(set(w) <= set(s["stoi"]) for w in s["samples"])
    assert af.cache_info().misses < 20           # programs are reused step after step


def test_tutorial_style_loop_with_loader_scheduler_and_device():
    import aneforge as af
    af.clear_cache()
    s = _run(TUTORIAL)
    assert s["device"] == "mps" and len(s["losses"]) == 8 * 3
    assert sum(s["losses"][-3:]) < 0.3 * sum(s["losses"][:3])
    assert s["test_loss"] < 0.3 * s["losses"][0]


def test_tutorial_style_loop_follows_torchs_run():
    """Same seed, same numbers: the data, the split, the initial weights and the shuffles are
    torch's, so the losses follow torch's own run of the script (fp16 arithmetic apart)."""
    import aneforge as af
    import torch
    af.clear_cache()
    ours = _run(TUTORIAL)
    theirs = _run(TUTORIAL.replace("import aneforge as torch\n", "import torch\n")
                  .replace("from aneforge", "from torch"))
    np.testing.assert_allclose(ours["losses"] + [ours["test_loss"]],
                               theirs["losses"] + [theirs["test_loss"]], rtol=0.02)
    assert torch.is_tensor(theirs["X"]) and not torch.is_tensor(ours["X"])
