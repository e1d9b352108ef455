#!/usr/bin/env python3
"""The reference workload: a small vision-language model with the shape of the real run
(examples/qwen-vggt), trained for real with torch.distributed (gloo) on CPU processes,
and recorded with stepprof's Python recorder.

Per optimizer update and rank:
  batch_fetch_and_count        fetch `accumulation` micro-batches from a DataLoader with
                               worker processes and prefetch, count their work
  micro_step_total             once per micro-batch
    forward_and_loss
      prepare_inputs           pad tokens, build masks and labels
      vision_forward           a small convolutional encoder, per frame
      geometry_total           a VGGT-like encoder: attention over all frames of a sample
        vggt_batched           one call when every sample of the micro-batch has the same
                               frame count
        vggt_single            one call per sample otherwise (the fallback)
      language_forward         a small causal transformer; loss on supervised tokens only
    backward_and_engine_step
      backward_and_communication
        backward               loss.backward() (DDP's no_sync: no overlapped all-reduce)
        gradient_allreduce     at the accumulation boundary: the data-parallel gradient
                               all-reduce (role: communication), bucketed and averaged as
                               DDP does, in a region of its own so the wait for the slowest
                               rank is measured apart from this rank's backward compute
      deepspeed_step           at the boundary (the real log's name for the engine step)
        gradient_clipping
        optimizer

Usage (4 ranks on one machine, a few updates):
  /usr/bin/python3 examples/pytorch/train_vlm.py --ranks 4 --updates 8 --out runs/random
  /usr/bin/python3 examples/pytorch/train_vlm.py --ranks 4 --updates 8 --out runs/by-frames --sampler by-frames
  /usr/bin/python3 examples/pytorch/train_vlm.py --ranks 4 --updates 8 --out runs/slow --slow-rank 2 --slow-factor 2
  /usr/bin/python3 examples/pytorch/train_vlm.py --ranks 2 --updates 20 --out runs/gpu --device cuda   # one GPU
then `stepprof report runs/random` reads the four logs (DIR/rank<R>.jsonl).
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

import stepprof

# --------------------------------------------------------------------------------------
# Data: samples of 1..9 frames with a question and a short supervised answer.

VOCAB = 512
IMAGE = 16            # frames are IMAGE x IMAGE RGB
TOKENS_PER_FRAME = 4  # visual tokens per frame after the vision encoder


def frames_of(index: int, seed: int) -> int:
    """Frame count of a sample (deterministic). Like the real log, most samples have
    the maximum of 9 frames and the rest 1..8."""
    r = random.Random(seed * 1_000_003 + index)
    return 9 if r.random() < 0.8 else r.randint(1, 8)


class VideoQADataset(Dataset):
    """Deterministic synthetic samples: frames (F, 3, IMAGE, IMAGE), token ids (L,) and
    labels (L,) with -100 everywhere but the answer tokens at the end."""

    def __init__(self, size: int, seed: int):
        self.size = size
        self.seed = seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict:
        r = random.Random(self.seed * 7_919 + index)
        n_frames = frames_of(index, self.seed)
        g = torch.Generator().manual_seed(self.seed * 104_729 + index)
        frames = torch.randn(n_frames, 3, IMAGE, IMAGE, generator=g)
        text_len = r.randint(24, 96)
        answer_len = r.randint(2, 8)
        tokens = torch.randint(1, VOCAB, (text_len,), generator=g)
        # The answer (the last answer_len tokens, the only supervised ones) depends on
        # the question's first token and on the frame count, so the model can learn it.
        for k in range(answer_len):
            tokens[text_len - answer_len + k] = (int(tokens[0]) + (k + 1) * n_frames) % (VOCAB - 1) + 1
        labels = torch.full((text_len,), -100, dtype=torch.long)
        labels[-answer_len:] = tokens[-answer_len:]
        return {"index": index, "frames": frames, "tokens": tokens, "labels": labels}


class MicroBatchSampler(Sampler):
    """Yields this rank's micro-batches (lists of dataset indices), `micro_batch` each.

    random:    shuffle all indices, give every rank its strided share, cut in order;
    by-frames: group indices by frame count and cut each group into micro-batches, so
               every micro-batch has a single frame count (the batched geometry path)."""

    def __init__(self, size, micro_batch, rank, world_size, mode, seed):
        self.size, self.mb, self.rank, self.world, self.mode, self.seed = size, micro_batch, rank, world_size, mode, seed

    def _batches(self):
        r = random.Random(self.seed)
        idx = list(range(self.size))
        r.shuffle(idx)
        if self.mode == "random":
            batches = [idx[i:i + self.mb] for i in range(0, len(idx) - self.mb + 1, self.mb)]
        else:
            groups: dict[int, list[int]] = {}
            for i in idx:
                groups.setdefault(frames_of(i, self.seed), []).append(i)
            batches = [g[i:i + self.mb] for g in groups.values() for i in range(0, len(g) - self.mb + 1, self.mb)]
            r.shuffle(batches)
        return batches[self.rank::self.world]

    def __iter__(self):
        return iter(self._batches())

    def __len__(self):
        return len(self._batches())


def collate(samples: list[dict]) -> dict:
    """Pads the token sequences of a micro-batch to its longest (padding on the right)."""
    lengths = [s["tokens"].numel() for s in samples]
    longest = max(lengths)
    tokens = torch.zeros(len(samples), longest, dtype=torch.long)
    labels = torch.full((len(samples), longest), -100, dtype=torch.long)
    for i, s in enumerate(samples):
        tokens[i, : lengths[i]] = s["tokens"]
        labels[i, : lengths[i]] = s["labels"]
    return {
        "indices": [s["index"] for s in samples],
        "frames": [s["frames"] for s in samples],
        "frame_counts": [s["frames"].shape[0] for s in samples],
        "tokens": tokens,
        "labels": labels,
        "text_lengths": lengths,
    }


# --------------------------------------------------------------------------------------
# Model.

D = 128


class VisionEncoder(nn.Module):
    """Per frame: two strided convolutions, then TOKENS_PER_FRAME tokens of width D."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.proj = nn.Linear(64 * (IMAGE // 4) ** 2, TOKENS_PER_FRAME * D)

    def forward(self, frames):  # (N, 3, IMAGE, IMAGE) -> (N, TOKENS_PER_FRAME, D)
        x = F.gelu(self.conv2(F.gelu(self.conv1(frames))))
        return self.proj(x.flatten(1)).view(-1, TOKENS_PER_FRAME, D)


GEO = 32  # width of the geometry encoder


class GeometryEncoder(nn.Module):
    """VGGT-like: alternating attention within each frame and across all frames of a
    sample (global attention, whose cost grows with the square of the frame count), in a
    narrow width, so that like a GPU kernel its cost per call is dominated by fixed
    per-operation overhead: one batched call for a micro-batch is much cheaper per frame
    than one call per sample (the fallback)."""

    def __init__(self, layers=8):
        super().__init__()
        self.down = nn.Linear(D, GEO)
        self.frame_attn = nn.ModuleList(nn.TransformerEncoderLayer(GEO, 2, 2 * GEO, 0.0, batch_first=True) for _ in range(layers))
        self.global_attn = nn.ModuleList(nn.TransformerEncoderLayer(GEO, 2, 2 * GEO, 0.0, batch_first=True) for _ in range(layers))
        self.up = nn.Linear(GEO, D)

    def forward(self, x):  # (B, F, T, D) with one frame count F for the whole batch
        b, f, t, _ = x.shape
        x = self.down(x)
        for fa, ga in zip(self.frame_attn, self.global_attn):
            x = fa(x.reshape(b * f, t, GEO)).reshape(b, f, t, GEO)
            x = ga(x.reshape(b, f * t, GEO)).reshape(b, f, t, GEO)
        return self.up(x)


class LanguageModel(nn.Module):
    def __init__(self, layers=1):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(1, 512, D))
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(D, 4, 2 * D, 0.0, batch_first=True) for _ in range(layers))
        self.head = nn.Linear(D, VOCAB)

    def forward(self, visual: list, tokens: list):
        """visual[i]: (V_i, D) tokens of sample i, tokens[i]: (L_i,) ids. Each sequence is
        [visual_i, text_i], right-padded to the longest; returns logits (B, S, VOCAB) and
        the padding mask (B, S), True at padding."""
        seqs = [torch.cat([v, self.embed(t)]) for v, t in zip(visual, tokens)]
        longest = max(s.shape[0] for s in seqs)
        dev = self.head.weight.device
        x = torch.zeros(len(seqs), longest, D, device=dev)
        pad = torch.ones(len(seqs), longest, dtype=torch.bool, device=dev)
        for i, s in enumerate(seqs):
            x[i, : s.shape[0]] = s
            pad[i, : s.shape[0]] = False
        x = x + self.pos[:, :longest]
        # True above the diagonal: a position attends to itself and earlier ones (a bool
        # mask like the padding mask; torch warns when the two masks' types differ).
        causal = torch.triu(torch.ones(longest, longest, dtype=torch.bool, device=dev), diagonal=1)
        for blk in self.blocks:
            x = blk(x, src_mask=causal, src_key_padding_mask=pad)
        return self.head(x), pad


class VLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.vision = VisionEncoder()
        self.geometry = GeometryEncoder()
        self.language = LanguageModel()


# --------------------------------------------------------------------------------------
# Training.


class Slowdown:
    """--slow-rank/--slow-factor: on the slow rank, every compute region takes `factor`
    times as long: the region's own time, then (factor - 1) times that more, asleep
    (--slow-mode sleep: the other ranks get its CPU meanwhile) or spinning (spin: the
    machine stays as busy as when every rank computes, as on GPUs, where a slow rank's
    device is its own and frees nothing for the others)."""

    def __init__(self, factor: float, mode: str = "sleep"):
        self.factor = factor
        self.mode = mode

    def __call__(self, started: float):
        if self.factor <= 1:
            return
        extra = (self.factor - 1) * (time.perf_counter() - started)
        if self.mode == "sleep":
            time.sleep(extra)
        else:
            end = time.perf_counter() + extra
            while time.perf_counter() < end:
                pass


def allreduce_gradients(params, world_size, bucket_bytes=4 << 20):
    """Averages gradients over ranks in buckets, as DDP's reducer does."""
    bucket, size = [], 0
    grads = [p.grad for p in params if p.grad is not None]

    def flush(b):
        flat = torch.cat([g.reshape(-1) for g in b])
        dist.all_reduce(flat)
        flat /= world_size
        off = 0
        for g in b:
            g.copy_(flat[off: off + g.numel()].view_as(g))
            off += g.numel()

    for g in grads:
        bucket.append(g)
        size += g.numel() * g.element_size()
        if size >= bucket_bytes:
            flush(bucket)
            bucket, size = [], 0
    if bucket:
        flush(bucket)


def train(rank: int, args, init_file: str):
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        # Every rank on the one GPU the machine has (gloo all-reduces CUDA tensors); made
        # current before the Recorder opens, so that it times regions on this device's
        # current stream (device_timing "auto").
        torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=args.ranks)

    global_batch = args.micro_batch * args.accumulation * args.ranks
    rec = stepprof.Recorder(
        str(Path(args.out) / "rank{rank}.jsonl"),
        rank=rank,
        world_size=args.ranks,
        config={
            "micro_batch": args.micro_batch,
            "accumulation": args.accumulation,
            "global_batch": global_batch,
            "seed": args.seed,
            "max_steps": args.updates,
            "workers": args.workers,
            "prefetch": args.prefetch,
            "first_step": 1,
            "last_step": args.updates,
            "model": "stepprof-reference-vlm",
            "sampler": args.sampler,
            "slow_rank": args.slow_rank,
            "slow_factor": args.slow_factor,
            "slow_mode": args.slow_mode,
            "supervised_token_loss": True,
            "device": args.device,
            "note": ("CPU run of examples/pytorch/train_vlm.py; host times only." if device.type == "cpu" else
                     "GPU run of examples/pytorch/train_vlm.py: every rank on one GPU; regions timed on "
                     "torch's current CUDA stream too."),
        },
        alternatives={"vggt_batched": "geometry", "vggt_single": "geometry"},
        roles={"gradient_allreduce": "communication", "batch_fetch_and_count": "data",
               "deepspeed_step": "optimizer"},
    )
    slow = Slowdown(args.slow_factor if rank == args.slow_rank else 1.0, args.slow_mode)

    model = VLM().to(device)
    ddp = nn.parallel.DistributedDataParallel(model)  # broadcasts rank 0's weights
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    params = [p for p in model.parameters() if p.requires_grad]

    per_update = args.micro_batch * args.accumulation
    dataset = VideoQADataset(size=per_update * args.ranks * (args.updates + 2), seed=args.seed)
    sampler = MicroBatchSampler(len(dataset), args.micro_batch, rank, args.ranks, args.sampler, args.seed)
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collate, num_workers=args.workers,
                        prefetch_factor=args.prefetch if args.workers > 0 else 2,
                        persistent_workers=args.workers > 0)
    batches = iter(loader)

    for step in range(1, args.updates + 1):
        update_started = time.perf_counter()
        with rec.region("batch_fetch_and_count"):
            mbs = [next(batches) for _ in range(args.accumulation)]
            count_work(rec, mbs)
        losses = []
        for i, mb in enumerate(mbs):
            last = i == len(mbs) - 1
            with rec.region("micro_step_total"):
                with rec.region("forward_and_loss"):
                    loss = forward_and_loss(rec, model, mb, slow, device)
                with rec.region("backward_and_engine_step"):
                    with rec.region("backward_and_communication"):
                        with rec.region("backward"), ddp.no_sync():
                            t0 = time.perf_counter()
                            (loss / args.accumulation).backward()
                            slow(t0)
                        if last:
                            with rec.region("gradient_allreduce"):
                                allreduce_gradients(params, args.ranks)
                    if last:
                        with rec.region("deepspeed_step"):
                            with rec.region("gradient_clipping"):
                                torch.nn.utils.clip_grad_norm_(params, 1.0)
                            with rec.region("optimizer"):
                                opt.step()
                                opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
        rec.end_update(step)
        if rank == 0 and args.verbose:
            print(f"update {step}: loss {sum(losses) / len(losses):.3f}, "
                  f"{(time.perf_counter() - update_started) * 1000:.0f} ms", flush=True)
    rec.close()
    dist.destroy_process_group()


def count_work(rec, mbs):
    """Per-update counters, frame histogram, shapes and sample indices (the real log's),
    and the per-micro-batch detail."""
    rec.count("micro_steps", len(mbs))
    for mb in mbs:
        counts = mb["frame_counts"]
        b, padded = mb["tokens"].shape
        visual = [TOKENS_PER_FRAME * f for f in counts]
        longest = max(v + t for v, t in zip(visual, mb["text_lengths"]))
        rec.count("samples", b)
        rec.count("frames", sum(counts))
        rec.count("token_slots", b * longest)
        rec.count("valid_tokens", sum(v + t for v, t in zip(visual, mb["text_lengths"])))
        rec.count("supervised_tokens", int((mb["labels"] != -100).sum()))
        rec.count("geometry_microbatches", 1)
        if len(set(counts)) == 1:
            rec.count("vggt_batched_microbatches", 1)
            rec.count("vggt_batched_samples", b)
            rec.count("vggt_batched_frames", sum(counts))
        else:
            rec.count("vggt_fallback_microbatches", 1)  # the real log's name
            rec.count("vggt_single_microbatches", 1)    # <path>_microbatches, found without a nesting file
            rec.count("vggt_single_samples", b)
            rec.count("vggt_single_frames", sum(counts))
        for f in counts:
            rec.frame(f)
        rec.input_shape((b, longest))
        rec.sample_indices(mb["indices"])
        # Per-micro-batch detail (docs/log-schema.md): each sample's frames and valid
        # tokens and the geometry path the micro-batch takes; `stepprof whatif` uses it.
        rec.microbatch(frames=counts, tokens=[v + t for v, t in zip(visual, mb["text_lengths"])],
                       path="vggt_batched" if len(set(counts)) == 1 else "vggt_single", padded_length=longest)
    # padding_fraction is derived by the recorder from token_slots and valid_tokens.


def forward_and_loss(rec, model: VLM, mb: dict, slow: Slowdown, device: torch.device):
    with rec.region("prepare_inputs"):
        counts = mb["frame_counts"]
        tokens, labels = mb["tokens"].to(device), mb["labels"].to(device)
        all_frames = torch.cat(mb["frames"]).to(device)
    with rec.region("vision_forward"):
        t0 = time.perf_counter()
        per_frame = model.vision(all_frames)  # (sum F, T, D)
        slow(t0)
    with rec.region("geometry_total"):
        chunks = list(per_frame.split(counts))
        if len(set(counts)) == 1:
            with rec.region("vggt_batched"):
                t0 = time.perf_counter()
                geo = model.geometry(torch.stack(chunks))  # (B, F, T, D)
                visual = [g.reshape(-1, D) for g in geo]
                slow(t0)
        else:
            visual = []
            for c in chunks:
                with rec.region("vggt_single"):
                    t0 = time.perf_counter()
                    visual.append(model.geometry(c.unsqueeze(0))[0].reshape(-1, D))
                    slow(t0)
    with rec.region("language_forward"):
        t0 = time.perf_counter()
        texts = [tokens[i, :n] for i, n in enumerate(mb["text_lengths"])]
        logits, _ = model.language(visual, texts)
        # Targets: the next token of each sample's text; visual positions and padding are
        # not supervised (loss on supervised answer tokens only).
        target = torch.full(logits.shape[:2], -100, dtype=torch.long, device=logits.device)
        for i, n in enumerate(mb["text_lengths"]):
            v = visual[i].shape[0]
            target[i, v - 1: v + n - 1] = labels[i, :n]
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1), ignore_index=-100)
        slow(t0)
    return loss


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=4, help="processes (data-parallel ranks), gloo backend")
    p.add_argument("--updates", type=int, default=8, help="optimizer updates to run and record")
    p.add_argument("--out", required=True, help="directory for rank<R>.jsonl")
    p.add_argument("--sampler", choices=["random", "by-frames"], default="random",
                   help="by-frames groups samples by frame count so every micro-batch takes vggt_batched")
    p.add_argument("--slow-rank", type=int, default=-1, help="rank whose compute is made slower")
    p.add_argument("--slow-factor", type=float, default=1.0, help="how many times slower (>= 1)")
    p.add_argument("--slow-mode", choices=["sleep", "spin"], default="sleep",
                   help="how the slow rank spends the extra time: asleep (its CPU goes to the other ranks) or "
                        "spinning (the machine stays as busy, as with a slow GPU)")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--accumulation", type=int, default=2)
    p.add_argument("--workers", type=int, default=1, help="data-loader worker processes per rank")
    p.add_argument("--prefetch", type=int, default=2, help="micro-batches prefetched per worker")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the model runs; cuda puts every rank on GPU 0 (gloo all-reduces CUDA tensors)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    if args.slow_factor < 1:
        p.error("--slow-factor must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device")
    if args.slow_rank >= args.ranks:
        p.error(f"--slow-rank {args.slow_rank} is not a rank of --ranks {args.ranks}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(train, args=(args, os.path.join(tmp, "init")), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
