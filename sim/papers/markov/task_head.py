"""G's minimal model of the task-recognition head: an encoder-pool-decoder circuit that reads a
Markov-chain sequence, compresses it into a task vector ``phi`` and decodes the next-state law
from ``phi`` and the current state (claims G.6, G.8: Gibson, Cui & Reddy, seed 004 lines 133-137,
148-152, 170).

The seed describes the circuit only in words ("编码器：MLP1 将相邻状态对编码为非线性嵌入 / 池化：
第二层注意力（Att2）在整个序列上对这些嵌入进行平均，形成一个紧凑的任务向量 phi / 解码器：MLP2
结合当前状态和任务向量 phi，检索并输出对应的转移矩阵") and says that in the minimal model K2* is
limited by the decoder (MLP2) and the task-vector dimension ``D_phi``. The form below is this
project's reading of those words; every choice is a field of :class:`TaskHeadConfig`.

Model
-----
Tokens ``x_0 .. x_{T-1}`` in ``{0..C-1}``, one-hot ``e_x``. At every position ``n`` the model
predicts ``x_{n+1}`` from ``x_0..x_n``::

    encoder (MLP1), the pair ending at t >= 1:
        u_t = W_e2 relu(W_e1 (e_{x_{t-1}} ⊕ e_{x_t}) + b_e1) + b_e2                      (D_phi,)
    pooling (Att2), causal, with no query (it cannot match the current state: no induction head):
        s_t = w . u_t,   a[n, t] = softmax_{1 <= t <= n} s_t,   phi_n = sum_t a[n, t] u_t    (D_phi,)
        phi_0 = 0 (no pair seen yet)
    decoder (MLP2), from the task vector and the current state:
        logits_n = W_d2 relu(W_d1 (phi_n ⊕ e_{x_n}) + b_d1) + b_d2                          (C,)

At ``w = 0`` the pooling is the plain average of the pair embeddings the seed describes; ``w`` is
learned (it can weigh some pairs above others, never by the current state). With ``D_phi >= C^2``
``phi_n`` can hold the empirical transition frequencies and the decoder can read the current
state's row: the in-context bigram (G2) is within reach, so the circuit can generalise (G.8). With
``D_phi`` small it can only tell training chains apart and recall each one's matrix (M2), up to a
number of chains set by ``D_phi`` and the decoder's width (G.6's K2*).

A leading model axis ``M`` (``TaskHeadConfig.models``): every weight has shape ``(M, ...)`` and
the ``M`` models never interact (their losses are summed, so each gets its own gradient; Adam's
update is elementwise), so ``M`` independent runs of one architecture cost one batched run, as the
SA-transformer's seed axis does. Inputs ``(B, T)`` (shared by the models) or ``(M, B, T)``.

Hook points (``sim.models.hooks``), each with the leading ``M``: ``encoder.out`` ``(M, B, T, D_phi)``
(``u_t``; position 0 holds no pair and is zero), ``pool.scores`` and ``pool.pattern`` ``(M, B, T, T)``
(query ``n``, key ``t``; masked scores are ``-inf``; row 0 has no key and its pattern is zero),
``phi`` ``(M, B, T, D_phi)``, ``decoder.hidden`` ``(M, B, T, decoder_width)`` (after the ReLU).

Written for this project from the seed's description; no code was copied (G's code is not public).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sim.models.hooks import HookPoint
from sim.verdict import Outcome

__all__ = ["TaskHeadConfig", "TaskHead", "train_task_heads", "task_heads_job", "task_heads_key", "task_heads_cost",
           "timing_run"]


@dataclass(frozen=True)
class TaskHeadConfig:
    """Architecture of :class:`TaskHead` (validated; recorded with every run)."""

    vocab: int = 10  # C
    max_len: int = 64  # longest input the model accepts
    d_phi: int = 8  # D_phi, the task vector's dimension
    encoder_width: int = 64  # MLP1's hidden layer
    decoder_width: int = 64  # MLP2's hidden layer
    models: int = 1  # leading model axis M
    init_scale: float = 1.0  # weights N(0, init_scale^2 * 2 / fan_in) (He's scale at 1), biases 0, w = 0

    def __post_init__(self):
        for name in ("vocab", "max_len", "d_phi", "encoder_width", "decoder_width", "models"):
            v = getattr(self, name)
            low = 2 if name in ("vocab", "max_len") else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"TaskHeadConfig.{name} must be an integer >= {low}, got {v!r}")
        if not self.init_scale > 0:
            raise ValueError(f"TaskHeadConfig.init_scale must be positive, got {self.init_scale}")

    def as_dict(self) -> dict:
        """Every field as plain data."""
        return dataclasses.asdict(self)


class TaskHead(nn.Module):
    """The encoder-pool-decoder circuit of the module docstring; ``forward(tokens) -> logits (M, B, T, C)``.

    Parameters
    ----------
    config : TaskHeadConfig
    generator : torch.Generator, optional
        Draws the initial weights, model by model in a fixed order; default: torch's global generator.
    dtype : torch.dtype
    """

    def __init__(self, config: TaskHeadConfig = TaskHeadConfig(), generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        self.config = cfg = config
        M, C, D = cfg.models, cfg.vocab, cfg.d_phi

        def weight(fan_in, fan_out):
            return nn.Parameter(torch.empty(M, fan_in, fan_out, dtype=dtype))

        def bias(n):
            return nn.Parameter(torch.zeros(M, n, dtype=dtype))

        self.enc_w1, self.enc_b1 = weight(2 * C, cfg.encoder_width), bias(cfg.encoder_width)
        self.enc_w2, self.enc_b2 = weight(cfg.encoder_width, D), bias(D)
        self.pool_w = bias(D)
        self.dec_w1, self.dec_b1 = weight(D + C, cfg.decoder_width), bias(cfg.decoder_width)
        self.dec_w2, self.dec_b2 = weight(cfg.decoder_width, C), bias(C)
        self.encoder = nn.ModuleDict({"out": HookPoint()})
        self.pool = nn.ModuleDict({"scores": HookPoint(), "pattern": HookPoint()})
        self.phi = HookPoint()
        self.decoder = nn.ModuleDict({"hidden": HookPoint()})
        T = cfg.max_len
        t = torch.arange(T)
        # key t <= query n, and t >= 1 (the first pair ends at position 1)
        self.register_buffer("keys", ((t[None, :] <= t[:, None]) & (t[None, :] >= 1)), persistent=False)  # (T, T)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Every weight ``N(0, init_scale^2 * 2 / fan_in)``, model by model; biases 0; pooling scores ``w = 0``."""
        for k in range(self.config.models):
            for w in (self.enc_w1, self.enc_w2, self.dec_w1, self.dec_w2):
                std = self.config.init_scale * math.sqrt(2.0 / w.shape[1])
                w[k].copy_(torch.randn(w.shape[1:], generator=generator, dtype=w.dtype) * std)
        for b in (self.enc_b1, self.enc_b2, self.pool_w, self.dec_b1, self.dec_b2):
            b.zero_()

    def _tokens(self, tokens: Tensor) -> Tensor:
        M = self.config.models
        if tokens.dim() == 2:
            tokens = tokens.unsqueeze(0).expand(M, *tokens.shape)
        if tokens.dim() != 3 or tokens.shape[0] != M:
            raise ValueError(f"tokens must be (B, T) or (M={M}, B, T), got {tuple(tokens.shape)}")
        if tokens.shape[2] > self.config.max_len:
            raise ValueError(f"sequence length {tokens.shape[2]} exceeds the model's max_len {self.config.max_len}")
        return tokens

    def pair_embeddings(self) -> Tensor:
        """MLP1 on every pair: ``(M, C^2, D_phi)``, row ``a C + b`` the embedding of ``(x_{t-1}, x_t) = (a, b)``."""
        C = self.config.vocab
        eye = torch.eye(C, dtype=self.enc_w1.dtype, device=self.enc_w1.device)
        pairs = torch.cat([eye.repeat_interleave(C, 0), eye.repeat(C, 1)], dim=1)  # (C^2, 2C): e_a ⊕ e_b
        h = torch.relu(pairs @ self.enc_w1 + self.enc_b1[:, None, :])  # (M, C^2, encoder_width)
        return h @ self.enc_w2 + self.enc_b2[:, None, :]  # (M, C^2, D_phi)

    def forward(self, tokens: Tensor) -> Tensor:
        """Next-state logits ``(M, B, T, C)`` for ``tokens`` ``(B, T)`` or ``(M, B, T)`` (module docstring)."""
        cfg = self.config
        x = self._tokens(tokens)
        M, B, T = x.shape
        C, D = cfg.vocab, cfg.d_phi
        pair = torch.cat([torch.zeros_like(x[..., :1]), x[..., :-1] * C + x[..., 1:]], dim=-1)  # (M, B, T)
        table = self.pair_embeddings()  # (M, C^2, D)
        u = torch.gather(table, 1, pair.reshape(M, B * T, 1).expand(M, B * T, D)).view(M, B, T, D)  # MLP1(pair)
        u = self.encoder["out"](u * (torch.arange(T, device=x.device) >= 1).to(u.dtype).view(1, 1, T, 1))
        keys = self.keys[:T, :T]  # (T, T)
        s = torch.einsum("mbtd,md->mbt", u, self.pool_w).unsqueeze(2).expand(M, B, T, T)  # (M, B, T, T): w . u_t
        s = self.pool["scores"](s.masked_fill(~keys, float("-inf")))
        a = self.pool["pattern"](torch.softmax(s, dim=-1).nan_to_num(0.0))  # row 0 has no key: all zero
        phi = self.phi(a @ u)  # (M, B, T, D)
        X = F.one_hot(x, C).to(u.dtype)  # (M, B, T, C)
        h = torch.cat([phi, X], dim=-1).view(M, B * T, D + C) @ self.dec_w1 + self.dec_b1[:, None, :]
        h = self.decoder["hidden"](torch.relu(h).view(M, B, T, -1))  # (M, B, T, decoder_width)
        return (h.view(M, B * T, -1) @ self.dec_w2 + self.dec_b2[:, None, :]).view(M, B, T, C)

    def losses(self, tokens: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy of each model over all positions ``(M,)``: ``targets[..., t] = x_{t+1}``,
        ``(B, T)`` or ``(M, B, T)``."""
        logits = self(tokens)  # (M, B, T, C)
        y = self._tokens(targets)
        return -torch.log_softmax(logits, dim=-1).gather(-1, y.unsqueeze(-1))[..., 0].mean((1, 2))


# --------------------------------------------------------------------------------- training
def train_task_heads(config: TaskHeadConfig, runs, *, N: int, C: int = 10, alpha: float = 0.1, lr: float = 3e-3,
                     batch: int = 64, steps: int = 3000, eval_every: int = 100, n_eval: int = 128,
                     strategies=("uniform", "G1", "G2", "M1", "M2"), stop_when_placed: str | None = None,
                     stop_set: str = "id", stop_margin_z: float = 3.0, stop_patience: int = 3, prior=None,
                     device: str = "cpu", progress=None) -> list[dict]:
    """Train ``len(runs)`` task heads of one architecture at once (the model axis ``M``) on the K-chain
    task of :mod:`sim.papers.markov.task`, and return one record per run in the form
    :func:`sim.papers.markov.task.train_markov` writes (so :mod:`sim.papers.markov.placement` reads it).

    ``runs[k]`` is ``{"K", "seed", "chain_seed"}``: model ``k`` trains on ``K`` chains drawn from
    ``chain_seed`` (``K = "inf"``: a fresh chain per sequence), with its initial weights from
    ``derive_seed(seed, "init")`` and batches, evaluation sequences and held-out chains from
    ``seed`` (:func:`~sim.papers.markov.task.batch_sampler`, :func:`~sim.papers.markov.task.evaluation_sets`).
    Training: :func:`sim.train.train`, one Adam stage (constant ``lr``) on the sum of the models' mean
    next-token cross-entropies (each model its own gradient), ``batch`` sequences of ``N + 1`` tokens
    per model per step. Evaluation at step 0, every ``eval_every`` steps and the last: each model's
    KL to every strategy on its own sets (``id`` from its training chains, ``ood`` from fresh ones).
    ``stop_when_placed``: training ends once every model has been placed at that strategy on
    ``stop_set`` (:func:`~sim.papers.markov.placement.absolute_placement` at margin ``stop_margin_z``) for
    ``stop_patience`` evaluations in a row. Besides the evaluations, each record holds the
    ``separations`` of the strategies on its sets (the placement's radii) and, at the end, the
    per-sequence cross-entropies of the model (``final_nll``) and of every strategy
    (``strategy_nll``) on each set, for paired comparisons.
    """
    import time

    import numpy as np

    from sim.papers.markov.placement import absolute_placement, judge_end, separations
    from sim.papers.markov.task import MarkovRunSpec, batch_sampler, evaluation_sets, run_chains, score_predictions
    from sim.seeds import derive_seed
    from sim.train import Stage, TrainConfig, train

    M = len(runs)
    if config.models != M:
        config = dataclasses.replace(config, models=M)
    t0 = time.perf_counter()
    specs, samplers, sets, seps = [], [], [], []
    for r in runs:
        spec = MarkovRunSpec(C=C, K=r["K"], N=N, alpha=alpha, prior=None if prior is None else prior.spec(),
                             seed=int(r["seed"]), chain_seed=r.get("chain_seed"), batch=batch, n_eval=n_eval,
                             strategies=tuple(strategies), ood=True, steps=steps, lr=lr)
        P, mu = run_chains(spec)
        specs.append(spec)
        samplers.append(batch_sampler(spec, P, mu))
        sets.append(evaluation_sets(spec, P, mu))
        seps.append(separations(sets[-1]))
    model = TaskHead(config).to(device)
    with torch.no_grad():  # model k's initial weights from its own seed alone
        for k, spec in enumerate(specs):
            one = TaskHead(dataclasses.replace(config, models=1),
                           generator=torch.Generator().manual_seed(derive_seed(spec.seed, "init") % 2 ** 63))
            for name, p in one.named_parameters():
                dict(model.named_parameters())[name][k].copy_(p[0])
    names = list(sets[0])
    inputs = {w: torch.as_tensor(np.stack([s[w][0] for s in sets]), device=device) for w in names}  # (M, n, N)
    recs = [{"steps": [], "train_loss": [], "eval": {w: {} for w in names}, "pair_order": list(strategies),
             "spec": {**spec.as_dict(), "model": "task_head", **config.as_dict()}, "chain_seed": spec.chains,
             "seeds": {p: derive_seed(spec.seed, p) for p in ("eval", "ood_chains", "ood_sequences", "data", "init")}}
            for spec in specs]
    streak = np.zeros(M, int)

    def evaluate(m: TaskHead, step: int, losses) -> bool:
        nonlocal streak
        with torch.no_grad():
            logq = {w: torch.log_softmax(m(inputs[w]).double(), dim=-1).cpu().numpy() for w in names}  # (M, n, N, C)
        placed = np.zeros(M, bool)
        for k, rec in enumerate(recs):
            rec["steps"].append(step)
            rec["train_loss"].append(float(np.mean(losses)) / M if losses else None)
            for w in names:
                _, preds, targets = sets[k][w]
                for s, (v, se) in score_predictions(preds, logq[w][k], targets).items():
                    rec["eval"][w].setdefault(s, []).append(v)
                    if s != "pair_se":
                        rec["eval"][w].setdefault(s + "_se", []).append(se)
            if stop_when_placed:
                pl = absolute_placement(rec, stop_set, seps[k], z=stop_margin_z)  # the claims' own reading
                placed[k] = judge_end(pl, (stop_when_placed,), stop_margin_z) is Outcome.HELD
        if progress is not None:
            progress(f"task heads (D_phi={config.d_phi}, decoder {config.decoder_width}): step {step}/{steps}")
        streak = np.where(placed, streak + 1, 0)
        return bool(stop_when_placed) and bool((streak >= stop_patience).all())

    train(model, lambda _gen, _step: torch.as_tensor(np.stack([s() for s in samplers]), device=device),
          TrainConfig(stages=(Stage(steps, lr, optimizer="adam"),), log_every=max(1, steps)), device=device,
          loss_fn=lambda m, x: m.losses(x[..., :-1], x[..., 1:]).sum(), evaluate=evaluate,
          eval_at=lambda step: step % eval_every == 0)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        final = {w: torch.log_softmax(model(inputs[w]).double(), dim=-1).cpu().numpy() for w in names}
    for k, rec in enumerate(recs):
        rec["timing"] = {"train_seconds": seconds / M, "batched_models": M, "device": device}
        rec["stopped_at"] = rec["steps"][-1]
        rec["separations"] = seps[k]
        # per-sequence cross-entropies at the end, the model's and each strategy's (paired comparisons)
        rec["final_nll"], rec["strategy_nll"] = {}, {}
        for w in names:
            _, preds, targets = sets[k][w]
            tg = targets[..., None]
            rec["final_nll"][w] = (-np.take_along_axis(final[w][k], tg, axis=2)[..., 0].mean(1)).tolist()
            rec["strategy_nll"][w] = {s: (-np.log(np.take_along_axis(p, tg, axis=2)[..., 0]).mean(1)).tolist()
                                      for s, p in preds.items()}
    return recs


# ------------------------------------------------------------------- the grid runner's jobs
def task_heads_job(job: dict) -> list[dict]:
    """:func:`train_task_heads` from plain arguments (``config`` as :meth:`TaskHeadConfig.as_dict`, the
    prior as its spec): one job of the grid runner (:func:`sim.claims.jobs.run_jobs`; module level, so a
    worker process imports it). The runs of one job train as one model axis, so they are one job:
    their stopping rule waits for all of them."""
    from sim.priors import parse_prior

    args = {k: v for k, v in job.items() if k not in ("config", "runs", "prior", "progress", "strategies")}
    return train_task_heads(TaskHeadConfig(**job["config"]), job["runs"], strategies=tuple(job["strategies"]),
                            prior=None if job.get("prior") is None else parse_prior(job["prior"]),
                            progress=job.get("progress"), **args)


def task_heads_key(job: dict) -> tuple:
    """Every input of :func:`task_heads_job` (its memo key; not ``progress``), as sorted JSON."""
    import json

    return ("markov.task_heads", json.dumps({k: v for k, v in job.items() if k != "progress"}, sort_keys=True))


def task_heads_cost(job: dict):
    """What one :func:`task_heads_job` trains: its runs as one model of ``len(runs)`` task heads,
    ``steps`` Adam steps in blocks of ``eval_every`` steps, each followed by an evaluation (fewer once
    a stopping rule holds)."""
    from sim.claims.jobs import Cost

    cfg, M = job["config"], len(job["runs"])
    shape = {"C": job["C"], "N": job["N"], "d_phi": cfg["d_phi"], "encoder_width": cfg["encoder_width"],
             "decoder_width": cfg["decoder_width"], "batch": job["batch"], "n_eval": job["n_eval"],
             "eval_every": job["eval_every"], "models": M}
    every = int(job["eval_every"])
    blocks = -(-int(job["steps"]) // every)  # ceil: the last block may be short
    return Cost.of("markov-task-head", "sim.papers.markov.task_head:timing_run", blocks=[(shape, blocks)],
                   block_steps=every, models=M, early_stop=job.get("stop_when_placed") is not None,
                   linear=("models", "eval_every"))


#: The seed of the cost plan's timing runs: they time a step, no number of theirs is reported.
TIMING_SEED = 0
#: The training chains of a timing run (a step's cost does not depend on how many).
_TIMING_CHAINS = 16


def timing_run(unit: str, shape: dict, count: int, device: str = "cpu") -> None:
    """The cost plan's timing run (:mod:`sim.plan`): ``count`` blocks of ``eval_every`` steps, each with its
    evaluation, of ``models`` task heads at ``shape`` (the fields of :func:`task_heads_cost`), never
    stopping early."""
    cfg = TaskHeadConfig(vocab=int(shape["C"]), max_len=int(shape["N"]), d_phi=int(shape["d_phi"]),
                         encoder_width=int(shape["encoder_width"]), decoder_width=int(shape["decoder_width"]))
    runs = [{"K": _TIMING_CHAINS, "seed": TIMING_SEED + k, "chain_seed": TIMING_SEED} for k in range(int(shape["models"]))]
    every = int(shape["eval_every"])
    train_task_heads(cfg, runs, N=int(shape["N"]), C=int(shape["C"]), batch=int(shape["batch"]), steps=every * int(count),
                     eval_every=every, n_eval=int(shape["n_eval"]), device=device)
