#!/usr/bin/env python3
"""Writes bench/workloads/*.json: the replay workload (four saved OpenAI chat request bodies).

The reference design's comparison protocol: a coding context of about 13k tokens with a
question, then three follow-ups of the same conversation; answers capped at 512 tokens,
temperature 0, reasoning effort low. `neural bench --workload replay` runs them through one chat
session and scripts/replay_servers.py sends them to running servers (neural-server, llama.cpp's
llama-server), so the later requests reuse the prompt cache as a served conversation does.

The context is a real, permissively licensed code file that any Debian 12 machine has: CPython
3.11's Lib/dataclasses.py (package libpython3.11-stdlib, Python Software Foundation License v2;
bench/workloads/README.md). Its SHA-256 is checked so the bodies are the same bytes wherever
they are regenerated. The assistant turns inside the follow-ups are fixed placeholder answers,
so the bodies do not depend on any model's output and every engine replays exactly the same bytes.

The effort is given twice: `reasoning_effort` (OpenAI's field, read by neural-server) and
`chat_template_kwargs.reasoning_effort` (how llama.cpp's servers pass it to gpt-oss's chat
template; neural-server reads that too and requires the two to agree).

Usage: scripts/make_replay_workload.py [--source FILE] [--out DIR]
The output is committed; rerun only to change the workload (and say so in docs/BENCHMARKS.md).
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SOURCE = Path("/usr/lib/python3.11/dataclasses.py")
# Debian 12's libpython3.11-stdlib 3.11.2-6+deb12u6; any other bytes would change the workload.
SOURCE_SHA256 = "2b43fbb6faa846bd01d682911953e02a9e43a764c85e687bce0c006d8e30ff9a"

SYSTEM = "You are a senior Python engineer reviewing a codebase. Answer precisely and cite code."

QUESTIONS = [
    "Explain how the dataclass decorator builds __init__ from the fields, and where and why it "
    "refuses mutable default values.",
    "How does _process_class collect fields from base classes, and what changes when some of "
    "them are kw_only?",
    "Write a unit test that checks that a frozen dataclass and its frozen subclass both raise "
    "FrozenInstanceError on assignment and on deletion of a field.",
    "Summarize what slots=True changes in the generated class and which pitfalls it brings.",
]

ANSWERS = [
    "_process_class gathers the fields, then _init_fn writes the source of __init__ as text, "
    "one assignment per field (through object.__setattr__ when the class is frozen), and "
    "_create_fn compiles it with exec. field() and _get_field refuse list, dict and set "
    "defaults (any unhashable default) because one object would be shared by every instance; "
    "default_factory is the way to get a fresh one.",
    "It walks the MRO in reverse and takes each base's __dataclass_fields__, so later classes "
    "override earlier fields of the same name. Fields marked kw_only, or after a KW_ONLY "
    "sentinel, are moved after the positional ones in __init__, which is what allows a "
    "positional field without a default to follow a keyword-only field with one.",
    "A test can define @dataclass(frozen=True) class P with x: int and a frozen subclass Q that "
    "adds y, then for each of P(1) and Q(1, 2) use assertRaises(FrozenInstanceError) around "
    "obj.x = 5 and around del obj.x, and check that the values did not change.",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "workloads")
    args = ap.parse_args()
    try:
        data = args.source.read_bytes()
    except OSError as e:
        sys.exit(f"make_replay_workload: cannot read {args.source}: {e} "
                 "(Debian: apt-get install libpython3.11-stdlib)")
    digest = hashlib.sha256(data).hexdigest()
    if digest != SOURCE_SHA256:
        sys.exit(f"make_replay_workload: {args.source} has SHA-256 {digest}, expected "
                 f"{SOURCE_SHA256} (another Python build would change the workload)")
    code = data.decode("utf-8")
    first = (f"Here is the source of CPython 3.11's Lib/dataclasses.py.\n\n```python\n{code}```"
             "\n\n" + QUESTIONS[0])
    args.out.mkdir(parents=True, exist_ok=True)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first}]
    for i, question in enumerate(QUESTIONS):
        if i > 0:
            messages.append({"role": "assistant", "content": ANSWERS[i - 1]})
            messages.append({"role": "user", "content": question})
        body = {"model": "gpt-oss", "messages": messages, "max_tokens": 512, "temperature": 0,
                "reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "low"}}
        path = args.out / f"{i + 1:02d}_{'context' if i == 0 else 'followup'}.json"
        path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
