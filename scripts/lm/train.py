"""Trains the transformer on a corpus's training stream, seeded, and
measures its held-out perplexity per byte (see scripts/train-lm).

Every held-out document is scored alone, from an end-of-text token, as the
trigram tables score it: each of its tokens and its closing end-of-text.
"""

import argparse
import json
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from model import Shape, Transformer

EOS = 256


def heldout_docs(ids):
    docs, cur = [], []
    for t in ids.tolist():
        cur.append(t)
        if t == EOS:
            docs.append(cur)
            cur = []
    return docs


@torch.no_grad()
def heldout_nll(model, docs, context):
    """Total natural-log loss over every held-out token, in batches of
    documents of about the same length."""
    model.eval()
    total, count = 0.0, 0
    order = sorted(range(len(docs)), key=lambda i: len(docs[i]))
    for at in range(0, len(order), 64):
        batch = [docs[i][: context - 1] for i in order[at : at + 64]]
        n = max(len(d) for d in batch)
        x = torch.full((len(batch), n), EOS, dtype=torch.long)
        y = torch.full((len(batch), n), -100, dtype=torch.long)
        for r, d in enumerate(batch):
            x[r, 1 : len(d)] = torch.tensor(d[:-1])
            y[r, : len(d)] = torch.tensor(d)
        logits = model(x)
        total += F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100, reduction="sum"
        ).item()
        count += int((y != -100).sum())
    model.train()
    return total, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="lmcorpus's output directory")
    ap.add_argument("--out", required=True, help="the float checkpoint to write")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    split = json.load(open(f"{args.data}/split.json"))
    train = torch.from_numpy(np.fromfile(f"{args.data}/train.u16", dtype="<u2").astype(np.int64))
    held = heldout_docs(np.fromfile(f"{args.data}/heldout.u16", dtype="<u2"))
    shape = Shape(vocab=split["vocab_size"])
    model = Transformer(shape, dropout=args.dropout)
    params = sum(p.numel() for p in model.parameters())
    print(f"train: {params} parameters, shape {shape.as_dict()}, {len(train)} training tokens", flush=True)

    decay = [p for p in model.parameters() if p.dim() == 2]
    flat = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": flat, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95),
    )
    warmup = max(1, args.steps // 20)

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        p = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))

    gen = torch.Generator().manual_seed(args.seed)
    t = shape.context
    started = time.time()
    for step in range(args.steps):
        starts = torch.randint(0, len(train) - t - 1, (args.batch,), generator=gen)
        x = torch.stack([train[s : s + t] for s in starts])
        y = torch.stack([train[s + 1 : s + t + 1] for s in starts])
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = F.cross_entropy(model(x).reshape(-1, shape.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"train: step {step}/{args.steps} loss {loss.item():.3f} lr {lr_at(step):.2e} "
                  f"{time.time() - started:.0f} s", flush=True)

    nll, count = heldout_nll(model, held, shape.context)
    result = {
        "parameters": params,
        "shape": shape.as_dict(),
        "steps": args.steps,
        "batch": args.batch,
        "seed": args.seed,
        "train_seconds": round(time.time() - started, 1),
        "heldout_tokens": count,
        "heldout_bytes": split["heldout"]["bytes"],
        "heldout_nll": nll,
        "ppl_per_token": math.exp(nll / count),
        "ppl_per_byte": math.exp(nll / split["heldout"]["bytes"]),
        "heldout_words": split["heldout"]["words"],
        "ppl_per_word": math.exp(nll / split["heldout"]["words"]),
    }
    torch.save({"shape": shape.as_dict(), "state": model.state_dict(), "result": result}, args.out)
    print("train: " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
