"""The ladder of chapter 14: chapter 11's language model, then one change at a time.

Each rung is a `lib.ModernConfig` that differs from the one before in one
choice (the norm, the positions, the feed-forward network, the key/value
heads, the biases). ``d_ff`` is re-chosen at every rung so that the model
keeps the baseline's number of *non-embedding* parameters (every parameter
except the token and position tables): a change is compared at equal
parameters, and so at nearly equal compute per token (≈ 6 N FLOPs for
training, plus attention, which every rung shares).

`train_rung` trains one rung with chapter 11's recipe (AdamW, warm-up then
cosine, clipping at 1) on the same batches for a given seed, so the rungs of
one seed see the same data in the same order, and scores it on held-out text
in bits per byte (`bits_per_byte`).

Every function that computes takes the ``device`` to compute on (the CPU by
default). Weights are initialised and training windows drawn on the CPU, then
moved, so a seed gives the same start and the same data on every device.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import torch

from lib._checks import require_device, require_number, require_positive_int, require_tensor
from lib.model.families import DecoderOnlyModel
from lib.model.kv_cache import KVCache
from lib.model.modern import ModernConfig, ModernDecoder, kv_cache_bytes
from lib.train.training import LMBatch, random_windows

__all__ = [
    "RungResult",
    "bits_per_byte",
    "copy_to_llama_attention",
    "half_order",
    "from_decoder_only",
    "heldout_nats",
    "kv_bytes_per_token",
    "ladder_configs",
    "matched_d_ff",
    "measured_kv_bytes_per_token",
    "non_embedding_parameters",
    "run_ladder",
    "train_rung",
    "training_speed",
]


def bits_per_byte(total_nats: float, text: str) -> float:
    """Bits per UTF-8 byte: total_nats / (ln 2 · bytes of `text`).

    ``total_nats`` is the summed -ln p of every token of the scored text, and
    ``text`` is that text. Two models with different tokenizers cut the same
    text into different numbers of tokens, so their losses per token do not
    compare; their totals over the same bytes do.
    """
    total_nats = require_number("total_nats", total_nats, minimum=0.0)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (the scored text), got {type(text).__name__}")
    n_bytes = len(text.encode("utf-8"))
    if n_bytes == 0:
        raise ValueError("text is empty: no bytes to divide by")
    return total_nats / (math.log(2) * n_bytes)


def non_embedding_parameters(model: torch.nn.Module) -> int:
    """Parameters other than the token embedding (tied to the head) and a learned position table."""
    if not isinstance(model, ModernDecoder):
        raise TypeError(f"model must be a lib.ModernDecoder, got {type(model).__name__}")
    skip = {id(model.embed.weight), id(model.head.weight)}
    if hasattr(model.pos, "embedding"):
        skip.add(id(model.pos.embedding.weight))
    return sum(p.numel() for p in model.parameters() if id(p) not in skip)


def _count(config: ModernConfig) -> int:
    with torch.device("meta"):
        return non_embedding_parameters(ModernDecoder(config))


def matched_d_ff(config: ModernConfig, target: int) -> int:
    """The d_ff that brings `config`'s non-embedding parameters closest to `target`
    (the count is linear in d_ff; ties go to the smaller d_ff)."""
    if not isinstance(config, ModernConfig):
        raise TypeError(f"config must be a lib.ModernConfig, got {type(config).__name__}")
    require_positive_int("target", target)
    a = _count(replace(config, d_ff=1))
    slope = _count(replace(config, d_ff=2)) - a  # parameters per unit of d_ff
    best = max(1, round((target - a) / slope) + 1)
    candidates = [d for d in (best - 1, best, best + 1) if d >= 1]
    return min(candidates, key=lambda d: (abs(a + (d - 1) * slope - target), d))


RUNG_CHANGES = (
    ("chapter 11", {}),
    ("+ RMSNorm", {"norm": "rms"}),
    ("+ rotary", {"position": "rotary"}),
    ("+ SwiGLU", {"ffn": "swiglu"}),
    ("+ GQA", {"n_kv_heads": None}),  # filled in by ladder_configs
    ("+ no biases", {"bias": False}),
)


def ladder_configs(vocab_size: int, *, d_model: int = 64, n_layers: int = 3, n_heads: int = 4,
                   n_kv_heads: int = 2, d_ff: int = 256, max_len: int = 64
                   ) -> list[tuple[str, ModernConfig]]:
    """The six rungs, each with one more change than the one before:
    chapter 11's model (pre-LayerNorm, learned positions, GELU FFN, biases, one
    key/value head per query head), + RMSNorm, + rotary, + SwiGLU, + GQA
    (``n_kv_heads``), + no biases. Every rung after the first has the d_ff of
    `matched_d_ff` (the baseline's non-embedding parameter count)."""
    config = ModernConfig(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                          n_kv_heads=n_heads, d_ff=d_ff, norm="layer", norm_first=True,
                          position="learned", ffn="gelu", bias=True, tie_embeddings=True,
                          max_len=max_len)
    require_positive_int("n_kv_heads", n_kv_heads)
    target = _count(config)
    rungs = []
    for name, change in RUNG_CHANGES:
        change = {k: (n_kv_heads if v is None else v) for k, v in change.items()}
        config = replace(config, **change)
        if rungs:
            config = replace(config, d_ff=matched_d_ff(config, target))
        rungs.append((name, config))
    return rungs


def kv_bytes_per_token(config: ModernConfig, bytes_per_value: int = 4) -> int:
    """KV-cache bytes per token: 2 (K and V) · n_layers · n_kv_heads · d_head · bytes_per_value."""
    if not isinstance(config, ModernConfig):
        raise TypeError(f"config must be a lib.ModernConfig, got {type(config).__name__}")
    require_positive_int("bytes_per_value", bytes_per_value)
    return 2 * config.n_layers * config.n_kv_heads * (config.d_model // config.n_heads) * bytes_per_value


@torch.no_grad()
def measured_kv_bytes_per_token(model: ModernDecoder, tokens: torch.Tensor) -> float:
    """Run `tokens` (B, T) through `model` (on the model's device) with a fresh
    `lib.KVCache` and return the bytes of its key and value tensors divided by B · T."""
    if not isinstance(model, ModernDecoder):
        raise TypeError(f"model must be a lib.ModernDecoder, got {type(model).__name__}")
    require_tensor("tokens", tokens)
    cache = KVCache(len(model.blocks))
    model.eval()
    model(tokens.to(model.embed.weight.device), cache=cache)
    return kv_cache_bytes(cache) / tokens.numel()


@torch.no_grad()
def heldout_nats(model: torch.nn.Module, batch: LMBatch, batch_size: int = 100) -> float:
    """Summed next-token -ln p over every window of `batch` (nats, not a mean), computed
    on the model's device."""
    if not isinstance(batch, LMBatch):
        raise TypeError(f"batch must be a lib.LMBatch, got {type(batch).__name__}")
    require_positive_int("batch_size", batch_size)
    was_training = model.training
    model.eval()
    parameter = next(model.parameters(), None)
    if parameter is not None:
        batch = batch.to(parameter.device)
    total = 0.0
    for i in range(0, batch.tokens.shape[0], batch_size):
        chunk = batch.tokens[i : i + batch_size]
        logits = model(chunk[:, :-1])
        total += torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).double(), chunk[:, 1:].flatten(), reduction="sum").item()
    model.train(was_training)
    return total


@dataclass
class RungResult:
    """One trained rung: its name, seed, sizes and measurements."""

    name: str
    seed: int
    d_ff: int
    parameters: int  # all, the tied matrix once
    non_embedding: int
    heldout_nats: float  # summed over the held-out windows
    bits_per_byte: float
    tokens_per_second: float  # training tokens (B · T per step) per wall-clock second
    kv_bytes_per_token: int  # from the formula, float32
    losses: list
    curve: list = field(default_factory=list)  # (step, held-out bits per byte) at eval_at
    state: dict = field(default_factory=dict, repr=False)  # the trained weights, on the CPU


def lm_optimizer(model, steps, lr, warmup):
    """Chapter 11's optimiser and schedule (also the ladder's and the bench scripts'):
    AdamW (betas 0.9, 0.99) with weight decay 0.1 on matrices only, a linear warm-up
    over `warmup` steps, then a cosine from `lr` down to 10% of it at `steps`."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                             {"params": others, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.99))

    def factor(step):  # chapter 11's schedule: linear warm-up, cosine to 10%
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


def train_rung(name: str, config: ModernConfig, train_ids: torch.Tensor, heldout: LMBatch,
               heldout_text: str, *, steps: int, batch_size: int = 32, seed: int = 0,
               lr: float = 3e-3, warmup: int = 50, device=None, eval_at=()) -> RungResult:
    """Train `config` from seed `seed` on random windows of `train_ids` (the same
    windows for every rung of that seed) and score it on `heldout`, whose
    predicted characters are `heldout_text`, on `device` ("cpu", "cuda", a
    torch.device; None is the CPU). The initial weights and the windows come from
    the CPU's generators, then move to `device`.

    ``eval_at``: steps (1 .. steps) after which the held-out bits per byte are also
    measured, kept in ``result.curve`` as (step, bits per byte), the last step
    always included (chapter 14's budget study, ``bench/rotary_budget.py``).
    Scoring draws no random numbers, so the training is the same with or without."""
    if not isinstance(config, ModernConfig):
        raise TypeError(f"config must be a lib.ModernConfig, got {type(config).__name__}")
    require_positive_int("steps", steps)
    require_positive_int("batch_size", batch_size)
    require_number("lr", lr, positive=True)
    device = require_device("device", device)
    if isinstance(eval_at, (str, bytes)) or not hasattr(eval_at, "__iter__"):
        raise TypeError(f"eval_at must be a sequence of steps, got {type(eval_at).__name__}")
    eval_at = sorted(set(eval_at) | {steps})
    for step in eval_at:
        require_positive_int("eval_at", step)
        if step > steps:
            raise ValueError(f"eval_at holds step {step}, past the run's {steps} steps")
    torch.manual_seed(seed)
    model = ModernDecoder(config).to(device)
    opt, schedule = lm_optimizer(model, steps, lr, warmup)
    g = torch.Generator().manual_seed(1000 + seed)
    batches = [random_windows(train_ids, config.max_len, batch_size, generator=g).to(device)
               for _ in range(steps)]
    losses, curve, scoring = [], [], 0.0
    model.train()
    start = time.perf_counter()
    for step, batch in enumerate(batches, start=1):
        loss = batch.loss(model)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        losses.append(loss.item())
        if step in eval_at and step < steps:
            began = time.perf_counter()
            curve.append((step, bits_per_byte(heldout_nats(model, heldout), heldout_text)))
            scoring += time.perf_counter() - began  # not training time
    seconds = time.perf_counter() - start - scoring  # loss.item() waited for every step
    nats = heldout_nats(model, heldout)
    curve.append((steps, bits_per_byte(nats, heldout_text)))
    return RungResult(
        name=name, seed=seed, d_ff=config.d_ff, parameters=model.count_parameters(),
        non_embedding=non_embedding_parameters(model), heldout_nats=nats,
        bits_per_byte=bits_per_byte(nats, heldout_text),
        tokens_per_second=steps * batch_size * config.max_len / seconds,
        kv_bytes_per_token=kv_bytes_per_token(config), losses=losses, curve=curve,
        state={k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
    )


def from_decoder_only(model: DecoderOnlyModel) -> ModernDecoder:
    """A `ModernDecoder` with `model`'s weights (chapter 11's `lib.DecoderOnlyModel`:
    pre-LN, learned positions, GELU or ReLU, no √d_model scale) and the same logits,
    on `model`'s device and in its dtype."""
    if not isinstance(model, DecoderOnlyModel):
        raise TypeError(f"model must be a lib.DecoderOnlyModel, got {type(model).__name__}")
    layer = model.layers[0]
    ffn = layer.feed_forward
    if not layer.norm_first or model.embed.scale or not hasattr(model.pos, "embedding"):
        raise ValueError("model must be pre-LN (norm_first=True), with learned positions and "
                         "scale_embedding=False, as chapter 11's")
    if ffn.activation not in ("gelu", "relu"):
        raise ValueError(f"model's activation must be 'gelu' or 'relu', got {ffn.activation!r}")
    config = ModernConfig(
        vocab_size=model.vocab_size, d_model=model.d_model, n_layers=len(model.layers),
        n_heads=model.n_heads, n_kv_heads=model.n_heads, d_ff=ffn.d_ff, norm="layer",
        norm_first=True, position="learned", ffn=ffn.activation, bias=True,
        tie_embeddings=True, norm_eps=layer.norm1.eps, max_len=model.pos.max_len)
    with torch.random.fork_rng(devices=[]):
        modern = ModernDecoder(config).to(device=model.embed.weight.device,
                                          dtype=model.embed.weight.dtype)
    mapping = {"embed.weight": "embed.embedding.weight",
               "pos.embedding.weight": "pos.embedding.weight",
               "final_norm.weight": "final_norm.weight", "final_norm.bias": "final_norm.bias"}
    for i in range(len(model.layers)):
        for a, b in (("attn.w_q", "self_attn.w_q"), ("attn.w_k", "self_attn.w_k"),
                     ("attn.w_v", "self_attn.w_v"), ("attn.w_o", "self_attn.w_o"),
                     ("norm1", "norm1"), ("norm2", "norm2"),
                     ("mlp.w_up", "feed_forward.linear1"), ("mlp.w_down", "feed_forward.linear2")):
            for p in ("weight", "bias"):
                mapping[f"blocks.{i}.{a}.{p}"] = f"layers.{i}.{b}.{p}"
    source = model.state_dict()
    modern.load_state_dict({k: source[v] for k, v in mapping.items()} | {"head.weight": source[
        "head.weight"]})
    return modern


def _run_seed(rungs, train_ids, heldout_tokens, heldout_text, steps, batch_size, seed, lr, warmup,
              device="cpu"):
    """One process: every rung for one seed, on one thread (and on `device`)."""
    torch.set_num_threads(1)
    heldout = LMBatch(heldout_tokens)
    return [train_rung(name, config, train_ids.long(), heldout, heldout_text, steps=steps,
                       batch_size=batch_size, seed=seed, lr=lr, warmup=warmup, device=device)
            for name, config in rungs]


def run_ladder(rungs: list[tuple[str, ModernConfig]], train_ids: torch.Tensor, heldout: LMBatch,
               heldout_text: str, *, steps: int, seeds=(0, 1), batch_size: int = 32,
               lr: float = 3e-3, warmup: int = 50, processes: int = 2, device=None
               ) -> list[RungResult]:
    """Train every rung on every seed; returns the results seed by seed, rung by rung.

    With ``processes`` > 1 the seeds run side by side in that many worker
    processes (spawned, one thread each: two cores train two seeds at once).
    The numbers do not depend on it: each run is seeded and single-threaded.
    ``device`` is where every run computes (None: the CPU), as in `train_rung`.
    """
    if not rungs or not all(isinstance(c, ModernConfig) for _, c in rungs):
        raise TypeError("rungs must be a non-empty list of (name, lib.ModernConfig) pairs")
    if not isinstance(heldout, LMBatch):
        raise TypeError(f"heldout must be a lib.LMBatch, got {type(heldout).__name__}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    require_positive_int("processes", processes)
    device = str(require_device("device", device))  # a string pickles for the workers
    ids = train_ids.to(torch.uint8) if int(train_ids.max()) < 256 else train_ids  # less to pickle
    jobs = [(rungs, ids, heldout.tokens, heldout_text, steps, batch_size, s, lr, warmup, device)
            for s in seeds]
    if processes == 1 or len(seeds) == 1:
        threads = torch.get_num_threads()
        try:
            out = [_run_seed(*job) for job in jobs]
        finally:
            torch.set_num_threads(threads)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(processes, len(seeds)), mp_context=context) as pool:
            out = list(pool.map(_run_seed, *zip(*jobs)))
    return [r for per_seed in out for r in per_seed]


def half_order(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The rows of W_Q or W_K (n_heads · d_head, d_in), laid out for interleaved rotary
    pairs, reordered for the half-split pairing: within each head, rows 2i go to i and
    rows 2i + 1 to i + d_head/2 (Hugging Face's conversion of Meta's LLaMA weights)."""
    require_tensor("weight", weight)
    require_positive_int("n_heads", n_heads)
    out, d_in = weight.shape
    if out % (2 * n_heads):
        raise ValueError(f"weight has {out} rows: not n_heads={n_heads} heads of an even width")
    return weight.view(n_heads, out // n_heads // 2, 2, d_in).transpose(1, 2).reshape(out, d_in)


@torch.no_grad()
def copy_to_llama_attention(attn, llama_attention) -> None:
    """Copy a `lib.GroupedQueryAttention`'s weights into Hugging Face's ``LlamaAttention``
    (chapter 14's check). Interleaved rotary pairs: W_Q's and W_K's rows are reordered with
    `half_order`, since Hugging Face rotates in halves; "half" pairs are copied as they are."""
    from lib.model.modern import GroupedQueryAttention

    if not isinstance(attn, GroupedQueryAttention):
        raise TypeError(f"attn must be a lib.GroupedQueryAttention, got {type(attn).__name__}")
    permute = attn.rope_base is not None and attn.pairing == "interleaved"
    q, k = attn.w_q.weight, attn.w_k.weight
    pairs = ((llama_attention.q_proj, half_order(q, attn.n_heads) if permute else q),
             (llama_attention.k_proj, half_order(k, attn.n_kv_heads) if permute else k),
             (llama_attention.v_proj, attn.w_v.weight), (llama_attention.o_proj, attn.w_o.weight))
    for target, weight in pairs:
        if target.weight.shape != weight.shape:
            raise ValueError(f"llama_attention's {tuple(target.weight.shape)} weights do not fit "
                             f"{tuple(weight.shape)}: build it with the same sizes")
        target.weight.copy_(weight)


def training_speed(rungs: list[tuple[str, ModernConfig]], train_ids: torch.Tensor, *,
                   steps: int = 5, repeats: int = 3, batch_size: int = 32, seed: int = 0,
                   device=None) -> dict:
    """Training tokens per second of each rung in this process, on its current threads
    and on `device` (None: the CPU): ``repeats`` rounds, each timing ``steps`` optimizer
    steps of every rung in turn (interleaved, so a change in the machine's load hits
    every rung alike), after one untimed warm-up step; the best round of each rung
    counts. Returns name -> tokens/s."""
    if not rungs or not all(isinstance(c, ModernConfig) for _, c in rungs):
        raise TypeError("rungs must be a non-empty list of (name, lib.ModernConfig) pairs")
    require_positive_int("steps", steps)
    require_positive_int("repeats", repeats)
    device = require_device("device", device)
    g = torch.Generator().manual_seed(seed)
    runs = []
    for name, config in rungs:
        torch.manual_seed(seed)
        model = ModernDecoder(config).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch = random_windows(train_ids, config.max_len, batch_size, generator=g).to(device)
        runs.append((name, model, opt, batch, config.max_len))

    def step(model, opt, batch):
        loss = batch.loss(model)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # a GPU step is timed when it has finished

    for _, model, opt, batch, _ in runs:
        step(model, opt, batch)  # warm-up: first-call allocations
    best = {name: float("inf") for name, *_ in runs}
    for _ in range(repeats):
        for name, model, opt, batch, _ in runs:
            start = time.perf_counter()
            for _ in range(steps):
                step(model, opt, batch)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: steps * batch_size * T / best[name] for name, _, _, _, T in runs}
