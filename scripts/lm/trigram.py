"""The trigram baseline: held-out perplexity per byte of a word trigram
built from the training documents, unpruned, with interpolated Kneser-Ney
smoothing (absolute discount 0.75 at every order, the unigram level
interpolated with the uniform distribution), scored as the transformer is
(each held-out document alone, from two end-of-text tokens, its closing
end-of-text included).

The served tables are pruned and give no probability to a token outside
their longest context's candidates, so their own perplexity is infinite;
this is the trigram at its best.
"""

import argparse
import json
import math
from collections import defaultdict

import numpy as np

EOS = 256
D = 0.75


def documents(ids):
    docs, cur = [], []
    for t in ids.tolist():
        if t == EOS:
            docs.append(cur)
            cur = []
        else:
            cur.append(t)
    return docs


def triples(doc):
    a = b = EOS
    for t in doc + [EOS]:
        yield a, b, t
        a, b = b, t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="lmcorpus's output directory (the served tokenizer's)")
    args = ap.parse_args()
    split = json.load(open(f"{args.data}/split.json"))
    vocab = split["vocab_size"]
    train = documents(np.fromfile(f"{args.data}/train.u16", dtype="<u2")[1:])
    held = documents(np.fromfile(f"{args.data}/heldout.u16", dtype="<u2"))

    tri = defaultdict(int)
    for doc in train:
        for k in triples(doc):
            tri[k] += 1
    # Highest order: counts. Context (a, b): total and distinct followers.
    ctx3_total, ctx3_types = defaultdict(int), defaultdict(int)
    # Middle order: continuation counts N1+(. b w).
    cont2 = defaultdict(int)
    for (a, b, w), c in tri.items():
        ctx3_total[(a, b)] += c
        ctx3_types[(a, b)] += 1
        cont2[(b, w)] += 1
    ctx2_total, ctx2_types = defaultdict(int), defaultdict(int)
    cont1 = defaultdict(int)
    for (b, w), c in cont2.items():
        ctx2_total[b] += c
        ctx2_types[b] += 1
        cont1[w] += 1
    uni_total = sum(cont1.values())
    uni_types = len(cont1)

    def p1(w):
        return (max(cont1.get(w, 0) - D, 0) + D * uni_types / vocab) / uni_total

    def p2(b, w):
        tot = ctx2_total.get(b, 0)
        if tot == 0:
            return p1(w)
        return (max(cont2.get((b, w), 0) - D, 0) + D * ctx2_types[b] * p1(w)) / tot

    def p3(a, b, w):
        tot = ctx3_total.get((a, b), 0)
        if tot == 0:
            return p2(b, w)
        return (max(tri.get((a, b, w), 0) - D, 0) + D * ctx3_types[(a, b)] * p2(b, w)) / tot

    nll, tokens = 0.0, 0
    for doc in held:
        for a, b, w in triples(doc):
            nll -= math.log(p3(a, b, w))
            tokens += 1
    result = {
        "vocab_size": vocab,
        "trigrams": len(tri),
        "heldout_tokens": tokens,
        "heldout_bytes": split["heldout"]["bytes"],
        "heldout_nll": nll,
        "ppl_per_token": math.exp(nll / tokens),
        "ppl_per_byte": math.exp(nll / split["heldout"]["bytes"]),
        "heldout_words": split["heldout"]["words"],
        "ppl_per_word": math.exp(nll / split["heldout"]["words"]),
    }
    print("trigram: " + json.dumps(result))


if __name__ == "__main__":
    main()
