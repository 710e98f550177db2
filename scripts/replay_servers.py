#!/usr/bin/env python3
"""Replays saved chat requests against fresh OpenAI-compatible servers, in mirrored order.

The reference design's side-by-side protocol (docs/BENCHMARKS.md "Server replay"): every run
starts one engine's server fresh (empty prompt cache), sends the workload's requests in name order
as one conversation (bench/workloads/*.json: a ~13k-token coding context, then three follow-ups),
and stops the server; the engines take turns in mirrored order (A B B A by default) so a drift of
the machine hits both alike. Each answer's figures come from the server's own `timings` object
(llama.cpp's llama-server and ik_llama.cpp write it; neural-server writes the same shape, see
docs/API.md):

  timed tokens  = predicted_n - 1 (the first token comes out of the prompt pass)
  timed seconds = predicted_ms / 1000 (first -> last generated token)
  weighted decode = sum of timed tokens / sum of timed seconds, over all answers and over the
                    follow-ups; the first prompt's time = the first request's prompt_ms.

It also checks that every engine rendered the same number of prompt tokens per request (within
--token-tolerance: two chat templates may differ by a few tokens, e.g. the date line) and that
the first request of every run was computed cold.

Usage:
  replay_servers.py --server neural='neural-server --model M --port {port} ...' \\
                    --server ik='llama-server -m M.gguf --jinja --port {port} ...' \\
                    [--order neural,ik,ik,neural] [--workload-dir DIR] [--json OUT.json]
  --server NAME=COMMAND  started (through the shell's word splitting, no shell) for every run of
                         NAME, with {port} replaced by a free loopback port; its output goes to
                         --log-dir; it gets SIGTERM (then SIGKILL) after the run.
  --url NAME=URL         an already running server instead (not fresh: say so when reporting).
Exit status: 0, 1 when a run failed (server did not start, HTTP error, no timings), 2 for bad
arguments or workload files, 3 when the prompt token counts disagree (the report is written).
Python 3.9+, standard library only.
"""
import argparse
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "neural-server-replay"


class Failure(Exception):
    """A run could not complete (exit 1)."""


class BadInput(Exception):
    """Bad arguments or workload files (exit 2)."""


# ---- workload ---------------------------------------------------------------------------------


def load_workload(directory, max_tokens=None):
    files = sorted(Path(directory).glob("*.json"))
    if not files:
        raise BadInput(f"no *.json request bodies in {directory}")
    bodies = []
    for f in files:
        try:
            body = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadInput(f"{f}: not a JSON request body: {e}") from None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            raise BadInput(f"{f}: a chat request body needs a 'messages' array")
        if body.get("stream"):
            raise BadInput(f"{f}: streamed requests carry no timings; remove 'stream'")
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        bodies.append((f.name, body))
    return bodies


# ---- servers ----------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=60.0, api_key=None):
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    req.add_header("Content-Type", "application/json")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        try:
            return e.code, json.loads(text)
        except json.JSONDecodeError:
            return e.code, {"error": {"message": text[:500]}}


class Server:
    """One engine's server for one run: started fresh from a command, or a given URL."""

    def __init__(self, name, command=None, url=None, log_path=None, start_timeout=600.0,
                 api_key=None):
        self.name, self.command, self.url, self.api_key = name, command, url, api_key
        self.log_path, self.start_timeout = log_path, start_timeout
        self.proc = None
        self.log = None

    def __enter__(self):
        if self.command is not None:
            port = free_port()
            argv = [a.replace("{port}", str(port)) for a in shlex.split(self.command)]
            self.url = f"http://127.0.0.1:{port}"
            self.log = open(self.log_path, "w", encoding="utf-8") if self.log_path else None
            try:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                             stdout=self.log or subprocess.DEVNULL,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as e:
                raise Failure(f"{self.name}: cannot start {argv[0]}: {e}") from None
        try:
            self.model_id = self.wait_ready()
        except BaseException:
            self.__exit__(None, None, None)  # a server that never got ready is stopped too
            raise
        return self

    def wait_ready(self):
        """Polls GET /health (llama-server: 503 while loading; it lists its model in /v1/models
        even then) until it is 200, then takes the model id from /v1/models."""
        deadline = time.monotonic() + self.start_timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise Failure(f"{self.name}: the server exited with status {self.proc.returncode} "
                              f"before it was ready (log: {self.log_path})")
            try:
                status, _ = http_json(self.url + "/health", timeout=5, api_key=self.api_key)
                if status == 200:
                    status, body = http_json(self.url + "/v1/models", timeout=5,
                                             api_key=self.api_key)
                    if status == 200 and body.get("data"):
                        return body["data"][0]["id"]
                last = f"HTTP {status}"
            except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
                last = str(e)
            time.sleep(0.2)
        raise Failure(f"{self.name}: not ready after {self.start_timeout:.0f} s ({last})")

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            # The whole process group: a wrapper script's children go too (POSIX; elsewhere
            # only the process itself).
            def stop(sig, fallback):
                if hasattr(os, "killpg"):
                    os.killpg(self.proc.pid, sig)
                else:
                    fallback()
            try:
                stop(signal.SIGTERM, self.proc.terminate)
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop(signal.SIGKILL, self.proc.kill)
                self.proc.wait()
            except ProcessLookupError:
                pass
        if self.log:
            self.log.close()
        return False


class VramSampler:
    """Largest GPU memory in use (MiB, summed over GPUs) while a run lasts, via nvidia-smi."""

    def __init__(self, enabled):
        self.enabled, self.peak_mib, self.proc, self.thread = enabled, None, None, None

    def __enter__(self):
        if self.enabled:
            try:
                self.proc = subprocess.Popen(
                    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                     "-lms", "250"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self.proc = None
            if self.proc:
                self.thread = threading.Thread(target=self.read, daemon=True)
                self.thread.start()
        return self

    def read(self):
        for line in self.proc.stdout:
            try:
                mib = int(line.strip())
            except ValueError:
                continue
            self.peak_mib = mib if self.peak_mib is None else max(self.peak_mib, mib)

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()
            self.thread.join(timeout=5)
        return False


# ---- one run ----------------------------------------------------------------------------------


def replay(server, bodies, request_timeout, api_key):
    answers = []
    for name, body in bodies:
        body = dict(body, model=server.model_id, stream=False)
        t0 = time.monotonic()
        try:
            status, reply = http_json(server.url + "/v1/chat/completions", body,
                                      timeout=request_timeout, api_key=api_key)
        except OSError as e:
            raise Failure(f"{server.name}: {name}: {e}") from None
        wall = time.monotonic() - t0
        if status != 200:
            message = (reply.get("error") or {}).get("message", reply) if isinstance(
                reply, dict) else reply
            raise Failure(f"{server.name}: {name}: HTTP {status}: {message}")
        t = reply.get("timings")
        if not isinstance(t, dict) or not all(
                isinstance(t.get(k), (int, float)) for k in
                ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")):
            raise Failure(f"{server.name}: {name}: the reply has no 'timings' object with "
                          "prompt_n, prompt_ms, predicted_n, predicted_ms")
        usage = reply.get("usage") or {}
        choice = (reply.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        answers.append({
            "request": name,
            "prompt_tokens": usage.get("prompt_tokens"),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "prompt_n": int(t["prompt_n"]),
            "prompt_ms": float(t["prompt_ms"]),
            "predicted_n": int(t["predicted_n"]),
            "predicted_ms": float(t["predicted_ms"]),
            "timed_tokens": max(int(t["predicted_n"]) - 1, 0),
            "timed_seconds": float(t["predicted_ms"]) / 1e3,
            "wall_seconds": wall,
            "finish_reason": choice.get("finish_reason"),
            "content": message.get("content"),
            "reasoning": message.get("reasoning_content") or message.get("reasoning"),
        })
        a = answers[-1]
        # One line per answer as it completes, so a chain stopped mid-way keeps what it measured.
        print(f"  {server.name} {name}: prompt {a['prompt_tokens']} tok ({a['prompt_n']} new) in "
              f"{a['prompt_ms'] / 1e3:.3f} s, {a['predicted_n']} tok in {a['timed_seconds']:.3f} s, "
              f"finish {a['finish_reason']}", file=sys.stderr, flush=True)
    return answers


def rate(tokens, seconds):
    return tokens / seconds if seconds > 0 else None


def figures(answers):
    """The protocol's figures over a list of answers of one or more runs."""
    def weighted(subset):
        tok = sum(a["timed_tokens"] for a in subset)
        sec = sum(a["timed_seconds"] for a in subset)
        return {"timed_tokens": tok, "timed_seconds": sec, "decode_tok_s": rate(tok, sec)}

    return {"all": weighted(answers), "follow_ups": weighted([a for a in answers
                                                               if not a["first"]])}


# ---- report -----------------------------------------------------------------------------------


def build_report(args, order, bodies, runs):
    engines = list(dict.fromkeys(order))
    summary = {}
    for e in engines:
        mine = [r for r in runs if r["engine"] == e]
        answers = [a for r in mine for a in r["answers"]]
        firsts = [r["first_prompt_seconds"] for r in mine]
        summary[e] = dict(figures(answers), runs=len(mine),
                          first_prompt_seconds=firsts,
                          first_prompt_seconds_median=statistics.median(firsts) if firsts else None,
                          peak_vram_mib=max((r["peak_vram_mib"] for r in mine
                                             if r["peak_vram_mib"] is not None), default=None))
    # The first engine against each other one: decode A / B (higher is better for A) and the
    # first prompt's time B / A (a time: > 1 means A was faster).
    ratios = {}
    a = engines[0]
    for b in engines[1:]:
        sa, sb = summary[a], summary[b]
        ratios[f"{a}/{b}"] = {
            "decode_all": ratio(sa["all"]["decode_tok_s"], sb["all"]["decode_tok_s"]),
            "decode_follow_ups": ratio(sa["follow_ups"]["decode_tok_s"],
                                       sb["follow_ups"]["decode_tok_s"]),
            "first_prompt_speedup": ratio(sb["first_prompt_seconds_median"],
                                          sa["first_prompt_seconds_median"]),
        }
    # Prompt token counts per request: every run of every engine, within the tolerance.
    check = []
    for i, (name, _) in enumerate(bodies):
        counts = {e: [r["answers"][i]["prompt_tokens"] for r in runs if r["engine"] == e]
                  for e in engines}
        values = [c for cs in counts.values() for c in cs]
        spread = (max(values) - min(values)) if values and None not in values else None
        check.append({"request": name, "prompt_tokens": counts, "spread": spread,
                      "ok": spread is not None and spread <= args.token_tolerance})
    cold = all(r["answers"][0]["prompt_n"] >= r["answers"][0]["prompt_tokens"] - 1
               for r in runs if r["answers"][0]["prompt_tokens"] is not None)
    return {
        "schema": SCHEMA, "version": 1,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.started)),
        "workload": {"dir": str(args.workload_dir), "requests": [n for n, _ in bodies],
                     "max_tokens": [b.get("max_tokens") for _, b in bodies]},
        "order": order,
        "servers": {e: {"command": args.commands.get(e), "url": args.urls.get(e),
                        "fresh": e in args.commands} for e in engines},
        "runs": runs,
        "summary": summary,
        "ratios": ratios,
        "prompt_token_check": {"tolerance": args.token_tolerance, "requests": check,
                               "ok": all(c["ok"] for c in check)},
        "first_prompt_cold": cold,
    }


def ratio(x, y):
    return x / y if x is not None and y else None


def fmt(v, digits=2):
    return "-" if v is None else f"{v:,.{digits}f}"


def table(report):
    lines = ["run  engine        request            prompt tok  new tok  prompt s   answer tok"
             "  decode tok/s"]
    for r in report["runs"]:
        for a in r["answers"]:
            lines.append(f"{r['run']:>3}  {r['engine']:<12}  {a['request']:<17}  "
                         f"{a['prompt_tokens'] if a['prompt_tokens'] is not None else '-':>10}  "
                         f"{a['prompt_n']:>7}  {a['prompt_ms'] / 1e3:>8.3f}  "
                         f"{a['predicted_n']:>10}  {fmt(rate(a['timed_tokens'], a['timed_seconds'])):>12}")
    lines.append("")
    lines.append("engine        runs  decode all (tok/s)  decode follow-ups  first prompt s (median)"
                 "  peak VRAM MiB")
    for e, s in report["summary"].items():
        lines.append(f"{e:<12}  {s['runs']:>4}  {fmt(s['all']['decode_tok_s']):>18}  "
                     f"{fmt(s['follow_ups']['decode_tok_s']):>17}  "
                     f"{fmt(s['first_prompt_seconds_median'], 3):>23}  "
                     f"{s['peak_vram_mib'] if s['peak_vram_mib'] is not None else '-':>13}")
    for k, r in report["ratios"].items():
        lines.append(f"{k}: decode all {fmt(r['decode_all'], 3)}x, follow-ups "
                     f"{fmt(r['decode_follow_ups'], 3)}x, first prompt "
                     f"{fmt(r['first_prompt_speedup'], 3)}x faster")
    c = report["prompt_token_check"]
    spreads = ", ".join(f"{x['request']} {x['spread']}" for x in c["requests"])
    lines.append(f"prompt tokens agree within {c['tolerance']}: "
                 f"{'yes' if c['ok'] else 'NO'} (spread: {spreads})")
    if not report["first_prompt_cold"]:
        lines.append("warning: a run's first prompt was served partly from a cache "
                     "(the server was not fresh)")
    return "\n".join(lines)


# ---- main -------------------------------------------------------------------------------------


def parse_pairs(values, what):
    out = {}
    for v in values or []:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise BadInput(f"--{what} wants NAME=VALUE, got {v!r}")
        if name in out:
            raise BadInput(f"--{what}: {name} given twice")
        out[name] = rest
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", action="append", metavar="NAME=COMMAND")
    ap.add_argument("--url", action="append", metavar="NAME=URL")
    ap.add_argument("--order", help="comma-separated engine names (default A,B,B,A)")
    ap.add_argument("--workload-dir", type=Path, default=ROOT / "bench" / "workloads")
    ap.add_argument("--max-tokens", type=int, help="override every body's max_tokens")
    ap.add_argument("--token-tolerance", type=int, default=8)
    ap.add_argument("--start-timeout", type=float, default=900.0)
    ap.add_argument("--request-timeout", type=float, default=1800.0)
    ap.add_argument("--api-key", default=os.environ.get("REPLAY_API_KEY"))
    ap.add_argument("--sample-vram", action="store_true",
                    help="record the peak nvidia-smi memory.used of every run")
    ap.add_argument("--log-dir", type=Path, help="server logs (default: next to --json)")
    ap.add_argument("--json", type=Path, help="write the report here")
    args = ap.parse_args(argv)
    args.started = time.time()
    try:
        args.commands = parse_pairs(args.server, "server")
        args.urls = parse_pairs(args.url, "url")
        both = set(args.commands) & set(args.urls)
        if both:
            raise BadInput(f"{sorted(both)[0]}: give --server or --url, not both")
        engines = list(args.commands) + list(args.urls)
        if not engines:
            raise BadInput("name at least one engine with --server or --url")
        if args.order:
            order = [e.strip() for e in args.order.split(",") if e.strip()]
            unknown = [e for e in order if e not in engines]
            if unknown:
                raise BadInput(f"--order names {unknown[0]!r}, which no --server/--url defines")
        elif len(engines) == 2:
            order = [engines[0], engines[1], engines[1], engines[0]]
        else:
            order = engines
        if args.max_tokens is not None and args.max_tokens < 1:
            raise BadInput("--max-tokens must be at least 1")
        if args.token_tolerance < 0:
            raise BadInput("--token-tolerance must not be negative")
        bodies = load_workload(args.workload_dir, args.max_tokens)
    except BadInput as e:
        print(f"replay_servers: {e}", file=sys.stderr)
        return 2
    log_dir = args.log_dir or (args.json.parent if args.json else Path("."))
    runs = []
    try:
        for i, engine in enumerate(order):
            log = log_dir / f"replay-{i}-{engine}.log" if engine in args.commands else None
            if log:
                log_dir.mkdir(parents=True, exist_ok=True)
            print(f"run {i}: {engine}", file=sys.stderr, flush=True)
            with VramSampler(args.sample_vram) as vram, \
                    Server(engine, args.commands.get(engine), args.urls.get(engine), log,
                           args.start_timeout, args.api_key) as server:
                answers = replay(server, bodies, args.request_timeout, args.api_key)
            for j, a in enumerate(answers):
                a["first"] = j == 0
            runs.append(dict(run=i, engine=engine, model_id=server.model_id,
                             server_log=str(log) if log else None,
                             first_prompt_seconds=answers[0]["prompt_ms"] / 1e3,
                             peak_vram_mib=vram.peak_mib, **figures(answers), answers=answers))
            if args.json:  # the runs so far, in case a later run fails or the chain is stopped
                args.json.parent.mkdir(parents=True, exist_ok=True)
                partial = args.json.with_name(args.json.name + ".partial")
                partial.write_text(json.dumps(build_report(args, order, bodies, runs), indent=1)
                                   + "\n", encoding="utf-8")
    except Failure as e:
        print(f"replay_servers: {e}", file=sys.stderr)
        return 1
    report = build_report(args, order, bodies, runs)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(table(report))
    return 0 if report["prompt_token_check"]["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
