#!/usr/bin/env python3
"""Writes bench/workloads/*.json: the `neural bench --workload replay` requests.

Four OpenAI chat request bodies, replayed in order through one chat session (so the later ones
reuse the prompt cache, as a served conversation does): a coding context of about 13k tokens
made of this project's own sources and a question, then three follow-ups. Answers are capped at
512 tokens, temperature 0, reasoning effort low. The assistant turns inside the follow-ups are
fixed placeholder answers, so the bodies do not depend on any model's output and every engine
replays exactly the same bytes.

Usage: scripts/make_replay_workload.py [--chars N] [--out DIR]
The output is committed; rerun only to change the workload (and say so in docs/BENCHMARKS.md).
"""
import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# In this order until the character budget is spent (C++ is about 3.9 characters per o200k
# token, so 50,300 characters is about 13k tokens; `neural tokenize` checks it).
SOURCES = [
    "engine/runtime/session.h",
    "engine/runtime/session.cpp",
    "engine/runtime/generate.h",
    "engine/runtime/generate.cpp",
    "engine/cpu/reference_model.h",
    "engine/cpu/reference_model.cpp",
    "engine/cpu/store_moe.h",
    "engine/cpu/store_moe.cpp",
    "engine/runtime/kv_cache.h",
    "engine/runtime/kv_cache.cpp",
    "engine/runtime/sampler.h",
    "engine/runtime/sampler.cpp",
    "engine/runtime/model.h",
    "engine/runtime/model.cpp",
]

SYSTEM = "You are a senior C++ engineer reviewing a codebase. Answer precisely and cite code."

QUESTIONS = [
    "Explain how ChatSession::respond reuses the KV cache between turns, and what happens when "
    "an earlier message is edited.",
    "Which parts of CpuModel::forward would you parallelize differently for long prompts, and why?",
    "Write a unit test that checks that cancelling a turn leaves the cache consistent.",
    "Summarize the risks of the store-backed MoE path compared to the reference path.",
]

ANSWERS = [
    "respond() renders the whole conversation, keeps the longest prefix of tokens that still "
    "matches the cached ones, truncates the KV cache there and runs only the rest. An edit "
    "changes the rendering from the edited message on, so the cache is rewound to that point.",
    "Attention runs one position per task, which is fine for decode but leaves the projections "
    "as separate passes for long prompts; grouping tokens per expert already amortizes weight "
    "decoding, so the next step would be blocking the dense matmuls over tokens.",
    "A test can start a turn on a worker thread, call cancel() after the first token event, and "
    "then check that cached_tokens() equals the number of tokens whose K/V were committed and "
    "that the next respond() produces the same tokens as a cold session.",
]


def context(chars):
    parts, used = [], 0
    for rel in SOURCES:
        text = (ROOT / rel).read_text(encoding="utf-8")
        block = f"=== {rel} ===\n{text}\n"
        if used + len(block) > chars:
            block = block[: max(0, chars - used)]
        parts.append(block)
        used += len(block)
        if used >= chars:
            break
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=50300)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "workloads")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    first = "Here is part of the source of a C++ inference engine.\n\n" + context(args.chars)
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": first + "\n\n" + QUESTIONS[0]}]
    for i, question in enumerate(QUESTIONS):
        if i > 0:
            messages.append({"role": "assistant", "content": ANSWERS[i - 1]})
            messages.append({"role": "user", "content": question})
        body = {"model": "gpt-oss", "messages": messages, "max_tokens": 512, "temperature": 0,
                "reasoning_effort": "low"}
        path = args.out / f"{i + 1:02d}_{'context' if i == 0 else 'followup'}.json"
        path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
