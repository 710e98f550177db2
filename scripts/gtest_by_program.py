#!/usr/bin/env python3
"""Runs ctest's gtest tests one test *program* at a time instead of one process per test.

ctest (gtest_discover_tests) starts a process for every TEST(); under AddressSanitizer a test
program spends seconds on what its tests share per process (the 27 MB tokenizer, a model loaded
in SetUpTestSuite), paid again by every test. This runs each program once with its selected
tests as a --gtest_filter, in the test's working directory, `--jobs` programs at a time, longest
first (by the summed seconds of its tests in a ctest cost file, --costs: the native build's
Testing/Temporary/CTestCostData.txt, else by its number of tests); a program whose tests fail
(or that crashes) is run again once with only the tests that did not pass (LeakSanitizer's
exit-time tracer crashed once in two runs after tests that had passed; a real error repeats). Every selected test must be reported passed or skipped: a
program that stops early fails the run. A test written by hand with add_test (its own
--gtest_filter of several names or a pattern, or its own ENVIRONMENT, e.g. the
neural_default_path_without_* runs with NEURAL_CPU_DISABLE) is not one gtest: it runs as ctest
would run it, its command with its environment in its directory, and passes on exit code 0
(again once if not). Used by scripts/sanitize.sh (docs/RELIABILITY.md "CI time").

  gtest_by_program.py BUILD_DIR --label REGEX [--exclude REGEX] [--jobs N] [--timeout S]
                      [--costs CTestCostData.txt]
  gtest_by_program.py --self-test   (a ctest: runs it on a made-up test program that passes,
                                     skips, fails, fails once and crashes)
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time


def selected_tests(build_dir, label, exclude):
    out = subprocess.run(["ctest", "--test-dir", build_dir, "-L", label, "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    programs = {}  # (program, working directory) -> [test names]
    whole = []  # (name, command, working directory, environment): run as ctest would
    others = []
    for t in json.loads(out).get("tests", []):
        cmd = t.get("command") or []
        name = t["name"]
        filt = [a for a in cmd[1:] if a.startswith("--gtest_filter=")]
        if not cmd or not filt:
            others.append(name)  # not a discovered gtest (e.g. a bash check): not run here
            continue
        if exclude and re.search(exclude, name):
            continue
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        wd = props.get("WORKING_DIRECTORY", os.path.dirname(cmd[0]))
        pattern = filt[0][len("--gtest_filter="):]
        if "ENVIRONMENT" in props or re.search(r"[:*?]", pattern):
            env = dict(v.split("=", 1) for v in props.get("ENVIRONMENT", []))
            whole.append((name, cmd, wd, env))
            continue
        programs.setdefault((cmd[0], wd), []).append(pattern)
    return programs, whole, others


def test_costs(path):
    """ctest's cost file: "name runs average-seconds" per line, then "---" and failed names."""
    costs = {}
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("---"):
                    break
                parts = line.split()
                if len(parts) == 3:
                    try:
                        costs[parts[0]] = float(parts[2])
                    except ValueError:
                        pass
    except OSError:
        pass  # no file (a first run): order by test count
    return costs


RESULT = re.compile(r"^\[\s+(OK|FAILED|SKIPPED)\s+\] (\S+)(?: \(\d+ ms\))?$")


def run_whole(cmd, wd, env, timeout, log):
    """A hand-written test: its command, environment and directory; passes on exit code 0."""
    started = time.time()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=wd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                                env={**os.environ, **env}).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return rc, time.time() - started


def run_program(program, wd, tests, timeout, log):
    started = time.time()
    with open(log, "w") as f:
        try:
            rc = subprocess.run([program, "--gtest_filter=" + ":".join(tests)], cwd=wd, stdout=f,
                                stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    done = set()
    with open(log, errors="replace") as f:
        for line in f:
            m = RESULT.match(line.rstrip("\n"))
            # gtest prints "[  FAILED  ] Name" again in its summary; only OK/SKIPPED count.
            if m and m.group(1) in ("OK", "SKIPPED"):
                done.add(m.group(2))
    not_passed = [t for t in tests if t not in done]
    return rc, not_passed, time.time() - started


FAKE_PROGRAM = r'''#!/usr/bin/env python3
# A stand-in gtest program: what each test does is in its name.
import os, sys
names = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--gtest_filter=")][0]
failed = False
for name in names.split(":"):
    once = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".ran")
    first = not os.path.exists(once)
    open(once, "w").close()
    if name.endswith("Crash") or (name.endswith("CrashOnce") and first):
        sys.stdout.flush()
        os._exit(134)
    print("[ RUN      ] " + name)
    if name.endswith("NeedsEnv") and os.environ.get("FAKE_NEEDED") != "1":
        print("[  FAILED  ] %s (0 ms)" % name)
        failed = True
        continue
    if name.endswith("Skip"):
        print("[  SKIPPED ] %s (0 ms)" % name)
    elif name.endswith("Fail") or (name.endswith("Flaky") and first):
        print("[  FAILED  ] %s (0 ms)" % name)
        failed = True
    else:
        print("[       OK ] %s (0 ms)" % name)
sys.exit(1 if failed else 0)
'''


def self_test():
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="gtest-by-program-")
    try:
        fake = os.path.join(tmp, "fake_tests")
        with open(fake, "w") as f:
            f.write(FAKE_PROGRAM)
        os.chmod(fake, 0o755)
        # label "good": every test passes in the end; "bad": one fails twice, one always crashes.
        tests = {"S.Pass": "good", "S.Skip": "good", "S.Flaky": "good", "S.CrashOnce": "good",
                 "S.Later": "good", "T.Fail": "bad", "T.Crash": "bad", "T.NotReached": "bad"}
        # label "order": one test in each of two programs, the second one costlier.
        fake_b = os.path.join(tmp, "fake_b_tests")
        shutil.copy(fake, fake_b)
        tests.update({"O.Pass": "order", "P.Pass": "order"})
        with open(os.path.join(tmp, "CTestTestfile.cmake"), "w") as f:
            for name, label in tests.items():
                prog = fake_b if name == "P.Pass" else fake
                f.write(f'add_test({name} "{prog}" "--gtest_filter={name}")\n'
                        f'set_tests_properties({name} PROPERTIES LABELS "{label}" '
                        f'WORKING_DIRECTORY "{tmp}")\n')
            f.write(f'add_test(a.script "/bin/true")\nset_tests_properties(a.script PROPERTIES '
                    f'LABELS "good")\n')
            # Hand-written: two names in one filter and an environment they need.
            for label, env in (("env", "FAKE_NEEDED=1"), ("noenv", "FAKE_NEEDED=0")):
                f.write(f'add_test(U.{label} "{fake}" "--gtest_filter=U.APass:U.BNeedsEnv")\n'
                        f'set_tests_properties(U.{label} PROPERTIES LABELS "{label}" '
                        f'ENVIRONMENT "{env}" WORKING_DIRECTORY "{tmp}")\n')
        cost_file = os.path.join(tmp, "CTestCostData.txt")
        with open(cost_file, "w") as f:
            f.write("O.Pass 1 0.5\nP.Pass 1 100\n---\n")

        def run(*args):
            p = subprocess.run([sys.executable, os.path.abspath(__file__), tmp, *args],
                               capture_output=True, text=True)
            if os.environ.get("GBP_DEBUG"):  # GBP_DEBUG=1: show each run's output
                print(p.stdout + p.stderr)
            return p.returncode, p.stdout + p.stderr

        checks = []
        rc, out = run("--label", "^good$")
        checks.append(("good: passes after one rerun", rc == 0 and "run again: all passed" in out
                       and "not gtest, not run here: a.script" in out))
        for f in os.listdir(tmp):
            if f.endswith(".ran"):
                os.remove(os.path.join(tmp, f))
        rc, out = run("--label", "^(good|bad)$")
        checks.append(("bad: fails naming each test that did not pass",
                       rc == 1 and all(f"fake_tests: {t}" in out
                                       for t in ("T.Fail", "T.Crash", "T.NotReached"))
                       and "fake_tests: S.Pass" not in out))
        rc, out = run("--label", "^(good|bad)$", "--exclude", "^T\\.")
        checks.append(("--exclude leaves the bad ones out", rc == 0))
        def first_program(out):
            return next(line.split()[0] for line in out.splitlines() if line.startswith("  "))
        rc, out = run("--label", "^order$", "--jobs", "1")
        checks.append(("without costs: the order of the test list",
                       first_program(out) == "fake_tests"))
        rc, out = run("--label", "^order$", "--jobs", "1", "--costs", cost_file)
        checks.append(("with costs: the costlier program first",
                       first_program(out) == "fake_b_tests"))
        rc, out = run("--label", "^env$")
        checks.append(("a hand-written test runs with its environment and filter",
                       rc == 0 and "U.env" in out and "as ctest runs it" in out))
        rc, out = run("--label", "^noenv$")
        checks.append(("a hand-written test that fails fails the run",
                       rc == 1 and "  U.noenv" in out))
        rc, out = run("--label", "^nothing$")
        checks.append(("no test selected is an error", rc == 1))
        for what, ok in checks:
            print(("ok      " if ok else "FAILED  ") + what)
        return 0 if all(ok for _, ok in checks) else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--label", required=True)
    ap.add_argument("--exclude", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--costs", default="")
    a = ap.parse_args()
    programs, whole, others = selected_tests(a.build_dir, a.label, a.exclude)
    if not programs and not whole:
        print("gtest_by_program: no gtest tests selected", file=sys.stderr)
        return 1
    logdir = os.path.join(a.build_dir, "Testing", "by-program")
    os.makedirs(logdir, exist_ok=True)
    total = sum(len(t) for t in programs.values()) + len(whole)
    print(f"gtest_by_program: {total} tests in {len(programs)} programs, {a.jobs} at a time"
          + (f"; not gtest, not run here: {', '.join(others)}" if others else ""))
    # Longest first, so the last program to finish is a short one.
    costs = test_costs(a.costs) if a.costs else {}
    order = sorted(programs.items(),
                   key=lambda kv: (-sum(costs.get(t, 0.0) for t in kv[1]), -len(kv[1])))
    failed = []

    def one(item):
        (program, wd), tests = item
        name = os.path.basename(program)
        log = os.path.join(logdir, name + ".log")
        rc, not_passed, secs = run_program(program, wd, tests, a.timeout, log)
        note = ""
        if not_passed:
            first = not_passed
            rc2, not_passed, secs2 = run_program(program, wd, first, a.timeout, log + ".again")
            secs += secs2
            note = (f"; {len(first)} not passed (exit {rc}, {log}), run again: "
                    + ("all passed" if not not_passed else f"{len(not_passed)} still not"))
        return name, len(tests), not_passed, secs, note

    def one_whole(item):
        name, cmd, wd, env = item
        log = os.path.join(logdir, name + ".log")
        rc, secs = run_whole(cmd, wd, env, a.timeout, log)
        note = ""
        if rc != 0:
            first = rc
            rc, secs2 = run_whole(cmd, wd, env, a.timeout, log + ".again")
            secs += secs2
            note = (f"; exit {first} ({log}), run again: "
                    + ("passed" if rc == 0 else f"exit {rc}"))
        return name, rc == 0, secs, note

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for name, n, not_passed, secs, note in pool.map(one, order):
            print(f"  {name:28s} {n:4d} tests {secs:7.1f} s{note}", flush=True)
            failed += [f"{name}: {t}" for t in not_passed]
        for name, ok, secs, note in pool.map(one_whole, whole):
            print(f"  {name:28s} as ctest runs it {secs:7.1f} s{note}", flush=True)
            if not ok:
                failed.append(name)
    if failed:
        print(f"gtest_by_program: {len(failed)} of {total} tests failed:")
        for f in failed:
            print("  " + f)
        return 1
    print(f"gtest_by_program: all {total} tests passed or skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
