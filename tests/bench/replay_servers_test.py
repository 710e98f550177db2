#!/usr/bin/env python3
"""scripts/replay_servers.py against two real neural-server instances on loopback.

Both engines are neural-server on the tiny fixture (standing in for Neural and ik_llama.cpp's
llama-server, which writes the same `timings` object). The workload is bench/workloads with the
code context cut to a few hundred tokens and 8-token answers, so the four fresh servers and 16
requests take seconds. Checks the report's shape and that its figures are consistent with each
other and with the servers' own usage (never timing values), then the bad-input exits.
Environment: NEURAL_SERVER_BIN, NEURAL_SHARED_DIR.
"""
import importlib.util
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "replay_servers.py"
SERVER = os.environ["NEURAL_SERVER_BIN"]
FIXTURE = Path(os.environ.get("NEURAL_SHARED_DIR", ROOT.parent / "shared")) / "fixtures" / \
    "tiny-gptoss-a"
CONTEXT_CHARS = 1500
MAX_TOKENS = 8
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def close(a, b):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def small_workload(out):
    """The committed bodies with the first user message's code cut (the same cut in all four)."""
    out.mkdir()
    for f in sorted((ROOT / "bench" / "workloads").glob("*.json")):
        body = json.loads(f.read_text(encoding="utf-8"))
        first = body["messages"][1]["content"]
        question = first[first.rindex("\n\n") + 2:]
        body["messages"][1]["content"] = first[:CONTEXT_CHARS] + "\n```\n\n" + question
        (out / f.name).write_text(json.dumps(body), encoding="utf-8")


def run(args, expect):
    p = subprocess.run([sys.executable, str(SCRIPT)] + args, capture_output=True, text=True,
                       timeout=240)
    check(p.returncode == expect,
          f"exit {p.returncode}, expected {expect}: {args[-4:]}\n{p.stdout}\n{p.stderr}")
    check("Traceback" not in p.stderr, f"a traceback: {p.stderr}")
    return p


def server_cmd():
    return " ".join(shlex.quote(a) for a in [SERVER, "--model", str(FIXTURE), "--host",
                                                "127.0.0.1", "--port", "{port}", "--threads",
                                                "1"])


def check_report(r, names):
    check(r["schema"] == "neural-server-replay" and r["version"] == 1, "schema")
    check(r["order"] == ["neural", "stand_in", "stand_in", "neural"], f"order {r['order']}")
    check(r["workload"]["requests"] == names, "request names")
    check(r["workload"]["max_tokens"] == [MAX_TOKENS] * 4, "max_tokens override")
    check(all(s["fresh"] for s in r["servers"].values()), "servers started fresh")
    check(r["first_prompt_cold"] is True, "first prompts cold")
    check([x["run"] for x in r["runs"]] == [0, 1, 2, 3], "run numbers")
    for run in r["runs"]:
        a = run["answers"]
        check([x["request"] for x in a] == names, "answers per run")
        check(run["model_id"] == "tiny-gptoss-a", "model id from /v1/models")
        check(Path(run["server_log"]).is_file(), "server log written")
        check(run["peak_vram_mib"] is None, "no VRAM sampled without --sample-vram")
        for i, x in enumerate(a):
            # The server's timings agree with its usage object.
            check(x["predicted_n"] == x["completion_tokens"], "predicted_n = completion_tokens")
            check(1 <= x["predicted_n"] <= MAX_TOKENS, "answer length")
            check(x["prompt_n"] == x["prompt_tokens"] - x["cached_tokens"],
                  "prompt_n = prompt_tokens - cached_tokens")
            check(x["timed_tokens"] == x["predicted_n"] - 1, "timed tokens")
            check(close(x["timed_seconds"], x["predicted_ms"] / 1e3), "timed seconds")
            check(x["prompt_ms"] > 0 and x["predicted_ms"] >= 0, "timings positive")
            check(x["first"] == (i == 0), "first flag")
            if i == 0:
                check(x["cached_tokens"] == 0, "a fresh server's first prompt is uncached")
            else:
                # Follow-ups continue the conversation: the previous prompt comes from the cache.
                check(x["cached_tokens"] >= a[i - 1]["prompt_tokens"] - 1 and x["prompt_n"] < 200,
                      f"follow-up {i} reuses the cache ({x['cached_tokens']} cached)")
                check(x["prompt_tokens"] > a[i - 1]["prompt_tokens"], "prompts grow")
        tok = sum(x["timed_tokens"] for x in a)
        sec = sum(x["timed_seconds"] for x in a)
        check(run["all"]["timed_tokens"] == tok and close(run["all"]["timed_seconds"], sec),
              "run totals")
        check(close(run["all"]["decode_tok_s"], tok / sec), "weighted decode over all answers")
        ftok = sum(x["timed_tokens"] for x in a[1:])
        fsec = sum(x["timed_seconds"] for x in a[1:])
        check(close(run["follow_ups"]["decode_tok_s"], ftok / fsec), "weighted follow-up decode")
        check(close(run["first_prompt_seconds"], a[0]["prompt_ms"] / 1e3), "first prompt time")
    # Greedy answers of the same engine on the same prompts are the same in every run.
    for i in range(4):
        contents = {(x["answers"][i]["content"], x["answers"][i]["predicted_n"])
                    for x in r["runs"]}
        check(len(contents) == 1, f"request {i}: the same answer in every run")
    for e, s in r["summary"].items():
        mine = [x for x in r["runs"] if x["engine"] == e]
        check(s["runs"] == 2, f"{e}: two runs")
        tok = sum(x["all"]["timed_tokens"] for x in mine)
        sec = sum(x["all"]["timed_seconds"] for x in mine)
        check(s["all"]["timed_tokens"] == tok and close(s["all"]["decode_tok_s"], tok / sec),
              f"{e}: summary weighted over runs, not a mean of rates")
        ftok = sum(x["follow_ups"]["timed_tokens"] for x in mine)
        fsec = sum(x["follow_ups"]["timed_seconds"] for x in mine)
        check(close(s["follow_ups"]["decode_tok_s"], ftok / fsec), f"{e}: follow-up summary")
        check(s["first_prompt_seconds"] == [x["first_prompt_seconds"] for x in mine],
              f"{e}: first prompt times")
    q = r["ratios"]["neural/stand_in"]
    sn, ss = r["summary"]["neural"], r["summary"]["stand_in"]
    check(close(q["decode_all"], sn["all"]["decode_tok_s"] / ss["all"]["decode_tok_s"]),
          "decode ratio")
    check(close(q["first_prompt_speedup"],
                ss["first_prompt_seconds_median"] / sn["first_prompt_seconds_median"]),
          "first prompt ratio")
    c = r["prompt_token_check"]
    check(c["ok"] and all(x["spread"] == 0 for x in c["requests"]), "prompt token check")
    check(c["requests"][0]["prompt_tokens"]["neural"] ==
          [x["answers"][0]["prompt_tokens"] for x in r["runs"] if x["engine"] == "neural"],
          "prompt token counts per engine")


def check_token_disagreement():
    """The check itself: counts 10 tokens apart fail at tolerance 8, pass at 10."""
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    spec = importlib.util.spec_from_file_location("replay_servers", SCRIPT)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)

    def answer(n, first):
        return {"request": "1.json" if first else "2.json", "prompt_tokens": n,
                "prompt_n": n if first else 5, "prompt_ms": 100.0, "predicted_n": 4,
                "timed_tokens": 3, "timed_seconds": 0.1, "first": first}

    def runs(n):
        out = []
        for i, (e, base) in enumerate([("a", n[0]), ("b", n[1])]):
            ans = [answer(base, True), answer(base + 20, False)]
            out.append(dict(run=i, engine=e, first_prompt_seconds=0.1, peak_vram_mib=None,
                            **m.figures(ans), answers=ans))
        return out

    class Args:
        token_tolerance, started, workload_dir = 8, 0.0, "w"
        commands, urls = {"a": "x", "b": "y"}, {}

    bodies = [("1.json", {}), ("2.json", {})]
    r = m.build_report(Args, ["a", "b"], bodies, runs((100, 110)))
    check(not r["prompt_token_check"]["ok"] and r["prompt_token_check"]["requests"][0]["spread"]
          == 10, "a 10-token disagreement fails at tolerance 8")
    check("prompt tokens agree within 8: NO" in m.table(r), "the table says NO")
    Args.token_tolerance = 10
    check(m.build_report(Args, ["a", "b"], bodies, runs((100, 110)))["prompt_token_check"]["ok"],
          "within tolerance 10")


def main():
    if not (FIXTURE / "config.json").is_file():
        print(f"fixture missing: {FIXTURE}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        work = tmp / "workload"
        small_workload(work)
        names = sorted(p.name for p in work.glob("*.json"))
        out = tmp / "report.json"
        p = run(["--server", "neural=" + server_cmd(), "--server", "stand_in=" + server_cmd(),
                 "--workload-dir", str(work), "--max-tokens", str(MAX_TOKENS), "--start-timeout",
                 "60", "--request-timeout", "120", "--json", str(out)], 0)
        if out.is_file():
            check_report(json.loads(out.read_text(encoding="utf-8")), names)
        check("prompt tokens agree within 8: yes" in p.stdout, "table: token check")
        check("neural/stand_in: decode all" in p.stdout, "table: ratios")

        # Bad input: a clear message and exit 2 (arguments, workload) or 1 (a run failed).
        bad = tmp / "bad"
        bad.mkdir()
        (bad / "01.json").write_text("{not json", encoding="utf-8")
        p = run(["--server", "a=" + server_cmd(), "--workload-dir", str(bad)], 2)
        check("not a JSON request body" in p.stderr, "malformed workload named")
        p = run(["--server", "a=" + server_cmd(), "--workload-dir", str(tmp / "none")], 2)
        check("no *.json" in p.stderr, "empty workload dir")
        p = run(["--server", "a=" + server_cmd(), "--order", "a,b", "--workload-dir", str(work)],
                2)
        check("'b'" in p.stderr, "unknown engine in --order")
        p = run(["--server", "a", "--workload-dir", str(work)], 2)
        check("NAME=VALUE" in p.stderr, "--server without a command")
        # A server that cannot start (no such model folder) ends the replay with its status.
        broken = " ".join(shlex.quote(a) for a in [SERVER, "--model", str(tmp / "missing"),
                                                     "--port", "{port}"])
        p = run(["--server", "a=" + broken, "--workload-dir", str(work), "--log-dir",
                 str(tmp / "logs"), "--start-timeout", "30"], 1)
        check("exited with status" in p.stderr, "a server that exits is reported")
        # A server without a chat endpoint that answers (wrong model files are a 4xx/5xx too).
        p = run(["--url", "a=http://127.0.0.1:9", "--workload-dir", str(work), "--start-timeout",
                 "1"], 1)
        check("not ready" in p.stderr, "an unreachable URL is reported")
    check_token_disagreement()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
