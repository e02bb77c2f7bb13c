#!/usr/bin/env python3
"""The official openai client, unmodified, against a running fabricd.

Usage: openai_client.py BASE_URL   (e.g. http://127.0.0.1:8080/v1)
Prints one JSON line with what it saw; exits non-zero on any surprise.
"""
import json
import sys

import openai
from openai import OpenAI


def main() -> int:
    base = sys.argv[1]
    client = OpenAI(base_url=base, api_key="unused", max_retries=0)
    out = {}
    r = client.completions.create(model="kjv", prompt="And God said", max_tokens=12, seed=5)
    out["text"] = r.choices[0].text
    out["finish_reason"] = r.choices[0].finish_reason
    out["usage"] = [r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens]
    stream = client.completions.create(model="kjv", prompt="And God said", max_tokens=12, seed=5, stream=True)
    out["streamed"] = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    models = client.models.list()
    out["models"] = sorted(m.id for m in models.data)
    try:
        client.completions.create(model="no-such-model", prompt="x")
        out["unknown_model"] = "accepted"
    except openai.NotFoundError as e:
        out["unknown_model"] = e.body.get("code") if isinstance(e.body, dict) else str(e.body)
    try:
        client.completions.create(model="kjv", prompt="x", max_tokens=0)
        out["bad_max_tokens"] = "accepted"
    except openai.BadRequestError as e:
        out["bad_max_tokens"] = e.body.get("param") if isinstance(e.body, dict) else str(e.body)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
