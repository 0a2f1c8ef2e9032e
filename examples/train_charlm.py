"""Train a small character-level transformer on Shakespeare's Macbeth with aneforge (default
backend: the ANE simulator off macOS), then the same network from the same initial weights on the
same batches in PyTorch fp32, and compare; then generate text with a KV cache.

    python examples/train_charlm.py [--steps 600] [--batch-size 16] [--out examples/out]

The model: token + position embedding, 2 pre-LayerNorm blocks of causal self-attention
(`F.scaled_dot_product_attention(q, k, v, is_causal=True)`) and a GELU MLP, a final LayerNorm and
a linear head (block 32, width 64, 4 heads). One class definition serves both frameworks
(`build(af)` and `build(torch)`), so the two networks are the same by construction.

Generation runs one decode step per token: (token, position, k_cache, v_cache) -> (logits,
k_cache', v_cache'). The caches have a fixed size (the block length) and travel as program inputs
and outputs, the new key/value row is written with a one-hot blend (the ANE has no scatter), and
the causal mask comes from the position, so ONE compiled program serves the prompt, every new
token and any number of tokens (when the window is full, the last half is fed again through the
same step). Sampling (greedy, or temperature with a seeded numpy generator) runs on the host.

Prints the loss at the logged steps side by side, a timing table (per training step, per
decoded token, compiles), where aneforge's greedy text first differs from torch's, and saves the
two loss curves to OUT/train_charlm_loss.png.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import aneforge as af
from aneforge.context import CTX

DATA = Path(__file__).resolve().parent / "data" / "macbeth.txt"
MASKED = -1e4          # the ANE's additive attention mask: -1e4, not -inf (-inf gives NaN paths)


# ---- data -------------------------------------------------------------------------------------
def load_text(path: Path = DATA):
    """(token ids, vocabulary): one id per distinct character, in sorted order."""
    text = path.read_text(encoding="ascii")
    vocab = sorted(set(text))
    lookup = {c: i for i, c in enumerate(vocab)}
    return np.array([lookup[c] for c in text], np.int64), vocab


def batches(data: np.ndarray, steps: int, batch_size: int, block: int, seed: int = 0):
    """The same (inputs, targets) windows for both frameworks: random offsets into the text,
    targets shifted by one character."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        start = rng.integers(0, len(data) - block - 1, batch_size)
        rows = start[:, None] + np.arange(block + 1)
        yield data[rows[:, :-1]], data[rows[:, 1:]]


# ---- the model, written once for both frameworks ----------------------------------------------
def build(lib):
    """The CharLM class over `lib` (aneforge or torch): same modules, names and arithmetic."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self, dim: int, heads: int):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def split_heads(self, x):                  # [B, T, D] -> [B, H, T, D/H]
            b, t, d = x.shape
            return x.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

        def mlp(self, x):
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

        def forward(self, x):
            q, k, v = (self.split_heads(p) for p in self.qkv(self.ln1(x)).chunk(3, dim=-1))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.mlp(x + self.proj(y.transpose(1, 2).reshape(x.shape)))

        def decode(self, x, slot, mask, k_cache, v_cache):
            """One token x [1, 1, D] against caches [H, L, D/H]; `slot` [1, L, 1] is the
            one-hot row to write, `mask` [1, L] the additive causal mask."""
            q, k, v = (self.split_heads(p)[0] for p in self.qkv(self.ln1(x)).chunk(3, dim=-1))
            k_cache, v_cache = write_row(k_cache, slot, k), write_row(v_cache, slot, v)
            y = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
            return self.mlp(x + self.proj(y.transpose(0, 1).reshape(x.shape))), k_cache, v_cache

    class CharLM(nn.Module):
        def __init__(self, vocab: int, block: int = 32, dim: int = 64, heads: int = 4,
                     layers: int = 2):
            super().__init__()
            self.block, self.dim, self.heads = block, dim, heads
            self.tok_emb, self.pos_emb = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
            self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
            self.ln_f, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)
            table = np.where(np.tril(np.ones((block, block), bool)), 0.0, MASKED)
            self.positions = lib.arange(block)                   # constants of every program
            self.causal_rows = lib.tensor(table.astype(np.float32))

        def forward(self, idx):                    # [B, T] token ids -> [B, T, vocab] logits
            x = self.tok_emb(idx) + self.pos_emb.weight[:idx.shape[1]]
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))

        def decode_step(self, token, pos, k_cache, v_cache):
            """token, pos: [1] ids; caches [layers, H, L, D/H] -> (logits [1, vocab], caches').
            The position picks the cache row, its embedding and its mask row by one-hot
            matmuls, so every position runs the same program."""
            onehot = (pos.unsqueeze(-1) == self.positions).to(self.pos_emb.weight.dtype)
            x = (self.tok_emb(token) + onehot @ self.pos_emb.weight).reshape(1, 1, self.dim)
            slot, mask = onehot.reshape(1, self.block, 1), onehot @ self.causal_rows
            ks, vs = [], []
            for blk, kc, vc in zip(self.blocks, k_cache.unbind(0), v_cache.unbind(0)):
                x, kc, vc = blk.decode(x, slot, mask, kc, vc)
                ks.append(kc)
                vs.append(vc)
            return self.head(self.ln_f(x)).reshape(1, -1), lib.stack(ks), lib.stack(vs)

        def empty_cache(self):
            shape = (len(self.blocks), self.heads, self.block, self.dim // self.heads)
            return lib.zeros(shape), lib.zeros(shape)

    return CharLM


def write_row(cache, slot, row):
    """cache with row written at the one-hot `slot`: cache * (1 - slot) + row * slot. Exact in
    fp16 (each term is multiplied by 0 or 1) and needs no scatter, which the ANE lacks."""
    return cache * (1 - slot) + row * slot


def make_model(vocab: int, **kw):
    return build(af)(vocab, **kw)


def torch_twin(model):
    """The same architecture in torch fp32, with the aneforge model's current weights."""
    import torch
    twin = build(torch)(model.head.out_features, block=model.block, dim=model.dim,
                        heads=model.heads, layers=len(model.blocks))
    twin.load_state_dict({k: torch.as_tensor(np.asarray(v, np.float32))
                          for k, v in model.state_dict().items()})
    return twin


# ---- training ---------------------------------------------------------------------------------
def train_aneforge(model, steps, lr, weight_decay, log_every, progress=True):
    import aneforge.nn.functional as F
    opt = af.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scaler = af.amp.GradScaler(init_scale=256.0)

    @af.compile            # captured on the first step, replayed after: one program per step
    def train_step(xb, yb):
        logits = model(af.tensor(xb))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), af.tensor(yb).reshape(-1))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    return _train("aneforge", lambda xb, yb: train_step(xb, yb).item(), steps, log_every,
                  progress)


def train_torch(model, steps, lr, weight_decay, log_every, progress=True):
    import torch
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)

    def train_step(xb, yb):
        logits = model(torch.from_numpy(xb))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 torch.from_numpy(yb).reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    return _train("torch", train_step, steps, log_every, progress)


def _train(name, step, batch_list, log_every, progress):
    """Run `step` over the batches: the loss and the wall time of every step, and the loss
    averaged over each logging window."""
    before = af.cache_info().misses
    losses, times = [], []
    bar = _progress(batch_list, name, progress)
    for xb, yb in bar:
        losses.append(timed(times, step, xb, yb))
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    return dict(losses=losses, logged=window_means(losses, log_every), times=times,
                steps=len(losses), compiles=af.cache_info().misses - before)


def timed(log: list, fn, *args):
    """fn(*args), appending its (wall, process CPU) seconds to `log`. CPU time is what a busy
    machine does not inflate."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    log.append((time.perf_counter() - wall, time.process_time() - cpu))
    return out


def window_means(losses, every: int) -> list:
    """(step, mean loss of the `every` steps ending there) at each logged step."""
    return [(i, float(np.mean(losses[i - every:i]))) for i in range(every, len(losses) + 1, every)]


def _progress(items, name, enabled):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=f"{name:>8}", unit="step")


# ---- KV-cache decoding ------------------------------------------------------------------------
def aneforge_stepper(model):
    """decode(token, pos, caches) -> (logits as numpy, caches'): the decode step compiled with
    af.compile (captured on the first token, replayed after) and run without gradients."""
    model.eval()

    @af.compile(fullgraph=True)
    def step(token, pos, k_cache, v_cache):
        return model.decode_step(af.tensor(token), af.tensor(pos), k_cache, v_cache)

    def decode(token, pos, caches):
        with af.no_grad():
            logits, k, v = step(np.array([token]), np.array([pos]), *caches)
        return logits.numpy()[0], (k, v)
    return decode


def torch_stepper(model):
    """The same decode step, eager torch fp32."""
    import torch
    model.eval()

    def decode(token, pos, caches):
        with torch.inference_mode():
            logits, k, v = model.decode_step(torch.tensor([token]), torch.tensor([pos]), *caches)
        return logits.numpy()[0], (k, v)
    return decode


def generate(decode, caches, prompt: list, n_new: int, block: int, temperature: float = 0.0,
             seed: int = 0) -> dict:
    """Feed `prompt`, then sample `n_new` tokens (greedy when temperature is 0, else from
    softmax(logits / temperature) with a seeded numpy generator). When the cache is full, the
    last block // 2 tokens are fed again from position 0, through the same step.
    Returns the new token ids, the logits each was drawn from and the (wall, CPU) time of
    every decode step."""
    rng = np.random.default_rng(seed)
    history, pos, times, used = list(prompt), 0, [], []

    def feed(tokens, pos, logits, caches):
        for t in tokens:
            logits, caches = timed(times, decode, t, pos, caches)
            pos += 1
        return pos, logits, caches
    pos, logits, caches = feed(prompt, 0, None, caches)
    for _ in range(n_new):
        used.append(logits)
        history.append(sample(logits, temperature, rng))
        if pos == block:                           # window full: keep the last half
            pos, tokens = 0, history[-(block // 2):]
        else:
            tokens = history[-1:]
        pos, logits, caches = feed(tokens, pos, logits, caches)
    return dict(tokens=history[len(prompt):], times=times, logits=used)


def sample(logits: np.ndarray, temperature: float, rng) -> int:
    if temperature == 0:
        return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    return int(rng.choice(len(p), p=p / p.sum()))


def first_difference(a: list, b: list) -> int | None:
    """Index of the first differing token, or None when they agree throughout."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def decode_report(model, vocab, prompt: str, n_new: int, temperature: float, seed: int):
    """Greedy (and sampled) text from aneforge and from torch with the same (aneforge's trained)
    weights, timings and the compile count."""
    ids, twin = [vocab.index(c) for c in prompt], torch_twin(model)
    before = af.cache_info().misses
    a_step, t_step = aneforge_stepper(model), torch_stepper(twin)
    a = generate(a_step, model.empty_cache(), ids, n_new, model.block)
    t = generate(t_step, twin.empty_cache(), ids, n_new, twin.block)
    sampled = generate(a_step, model.empty_cache(), ids, n_new, model.block, temperature, seed)
    compiles = af.cache_info().misses - before
    text = lambda tokens: "".join(vocab[i] for i in tokens)       # noqa: E731
    return dict(greedy=text(a["tokens"]), torch_greedy=text(t["tokens"]),
                sampled=text(sampled["tokens"]), tokens=(a["tokens"], t["tokens"]),
                differ_at=(at := first_difference(a["tokens"], t["tokens"])),
                margin=None if at is None else top2_gap(t["logits"][at]),
                first_step=a["times"][0], seconds_per_token=steady(a["times"] + sampled["times"]),
                torch_seconds_per_token=steady(t["times"]),
                calls=len(a["times"]) + len(sampled["times"]), compiles=compiles,
                **host_overhead(a_step, model))


def top2_gap(logits: np.ndarray) -> float:
    """How far torch's best next character is ahead of the second best."""
    top = np.sort(np.asarray(logits, np.float32))[-2:]
    return float(top[1] - top[0])


def steady(times: list) -> np.ndarray:
    """Mean (wall, CPU) seconds per step after the first (which compiles, or warms torch up)."""
    return np.mean(np.array(times[1:]), axis=0)


def host_overhead(decode, model, n: int = 100) -> dict:
    """Split a replayed decode step into the program's own run (the simulated engine, process
    CPU time: its kernels use a thread pool) and the rest, on the host: arguments, transport,
    replay bookkeeping, reading the logits (this thread's CPU time outside the run)."""
    cls = type(next(reversed(CTX.cache.entries.values())).executable)
    original, runs = cls.run, []

    def timed_run(self, inputs):
        cpu, mine = time.process_time(), time.thread_time()
        out = original(self, inputs)
        runs.append((time.process_time() - cpu, time.thread_time() - mine))
        return out
    caches = model.empty_cache()
    cls.run = timed_run
    try:
        start = time.thread_time()
        for pos in range(n):
            _, caches = decode(pos % 7, pos % model.block, caches)
        total = (time.thread_time() - start) / n
    finally:
        cls.run = original
    program, in_thread = np.mean(runs, axis=0)
    return dict(program_seconds=program, host_seconds=total - in_thread)


# ---- report -----------------------------------------------------------------------------------
def loss_table(a: dict, t: dict) -> str:
    lines = [f"{'step':>6}  {'aneforge (sim)':>14}  {'torch fp32':>10}  {'rel. diff':>9}"]
    for (i, la), (_, lt) in zip(a["logged"], t["logged"]):
        lines.append(f"{i:>6}  {la:>14.4f}  {lt:>10.4f}  {(la - lt) / lt:>+9.2%}")
    return "\n".join(lines)


def timing_table(a: dict, t: dict, d: dict) -> str:
    """Times as wall / process CPU: on a busy machine the CPU figure is the cost."""
    ms = lambda s: " / ".join(f"{x * 1e3:.2f}" for x in np.ravel(s)) + " ms"   # noqa: E731
    rows = [("first training step (compile / warm-up)", ms(a["times"][0]), ms(t["times"][0])),
            ("per training step, after the first", ms(steady(a["times"])),
             ms(steady(t["times"]))),
            ("training compiles", f"{a['compiles']} for {a['steps']} steps", "n/a (eager)"),
            ("first decode step (compile)", ms(d["first_step"]), ""),
            ("per decoded token (KV cache)", ms(d["seconds_per_token"]),
             ms(d["torch_seconds_per_token"])),
            ("  program run: the simulated engine", "- / " + ms(d["program_seconds"]), ""),
            ("  host overhead of the replayed step", "- / " + ms(d["host_seconds"]), ""),
            ("decode compiles", f"{d['compiles']} for {d['calls']} steps", "n/a (eager)")]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'wall / CPU':<{width}}  {'aneforge (sim)':>22}  {'torch fp32':>18}"]
    lines += [f"{r[0]:<{width}}  {r[1]:>22}  {r[2]:>18}" for r in rows]
    return "\n".join(lines)


def plot(a: dict, t: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, dx) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True,
                                 gridspec_kw={"height_ratios": [3, 1.3]})
    ax.plot(a["losses"], label=f"aneforge ({af.get_backend().name}, fp16)", lw=1.0)
    ax.plot(t["losses"], label="torch (fp32)", lw=1.0, alpha=0.8, ls="--")
    ax.set(ylabel="cross-entropy loss",
           title="char transformer on Macbeth: same init, same batches")
    ax.legend()
    diff = np.abs(np.array(a["losses"]) - np.array(t["losses"]))
    dx.plot(diff, color="k", lw=0.8)
    dx.set(xlabel="step", ylabel="|difference|", yscale="log")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--tokens", type=int, default=200, help="characters to generate")
    p.add_argument("--prompt", default="MACBETH.\n")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch's intra-op threads (the simulator runs on one)")
    p.add_argument("--out", type=Path, default=Path("examples/out"))
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(args.torch_threads)

    data, vocab = load_text()
    af.manual_seed(args.seed)
    model = make_model(len(vocab), block=args.block, dim=args.dim, heads=args.heads)
    twin = torch_twin(model)
    steps = list(batches(data, args.steps, args.batch_size, args.block, args.seed))
    hp = (args.lr, args.weight_decay, args.log_every, not args.no_progress)
    a = train_aneforge(model, steps, *hp)
    t = train_torch(twin, steps, *hp)
    print(f"\nchar transformer (2 blocks, width {args.dim}, {args.heads} heads, block "
          f"{args.block}, vocab {len(vocab)}) on Macbeth, {a['steps']} steps of batch "
          f"{args.batch_size}, AdamW lr={args.lr}\n")
    print(loss_table(a, t))
    d = decode_report(model, vocab, args.prompt, args.tokens, args.temperature, args.seed)
    print()
    print(timing_table(a, t, d))
    where = "all agree" if d["differ_at"] is None else (
        f"first differs at token {d['differ_at']}, where torch's two best next characters are "
        f"{d['margin']:.4f} apart in logit (fp16 carries about 3 decimal digits)")
    print(f"\ngreedy decode, {args.tokens} tokens vs torch's from the same weights: {where}")
    print(f"--- aneforge greedy ---\n{args.prompt}{d['greedy']}")
    print(f"--- aneforge, temperature {args.temperature}, seed {args.seed} ---\n"
          f"{args.prompt}{d['sampled']}")
    path = args.out / "train_charlm_loss.png"
    plot(a, t, path)
    print(f"\nloss curves: {path}")
    return {"aneforge": a, "torch": t, "decode": d}


if __name__ == "__main__":
    main()
