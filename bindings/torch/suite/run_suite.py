"""Runs torch's distributed test suite on gloo and on hoop in one run and compares them.

    run_suite.py [--backends gloo,hoop] [--world-size 3] [--tests FILE] [--log-dir DIR]

Each backend's tests run in a process of their own (dist_suite.py, BACKEND set), one after the
other; the ranks of each test are processes of that one. Prints per backend how many tests
passed, failed, were skipped or ended in an error, then the tests that pass on gloo but not
on hoop, and those that pass on hoop only. Exit status 1 when hoop lets a test down: one
passing on gloo does not pass on hoop or, when gloo is not in the run, one fails on hoop.

--tests names a file of test names (one a line, # comments), by default every test.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUTCOMES = ("passed", "failed", "skipped", "error")


def read_names(path):
    with open(path) as f:
        return [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]


def run_backend(backend, args, names):
    """Runs the tests on one backend; returns {test: result} (a test that never reported, as
    when its process died, is an error)."""
    os.makedirs(args.log_dir, exist_ok=True)
    results = os.path.join(args.log_dir, f"{backend}.jsonl")
    log = os.path.join(args.log_dir, f"{backend}.log")
    open(results, "w").close()
    env = dict(os.environ, BACKEND=backend, WORLD_SIZE=str(args.world_size), OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    cmd = [sys.executable, os.path.join(HERE, "dist_suite.py"), results] + names
    seen = {}
    started = time.monotonic()
    with open(log, "w") as out:
        child = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        while True:
            done = child.poll() is not None
            with open(results) as f:
                for line in f.readlines()[len(seen):]:
                    r = json.loads(line)
                    seen[r["test"]] = r
                    print(f"{backend} {len(seen):4d} {r['outcome']:8s} {r['seconds']:7.1f} s  {r['test']}", flush=True)
            if done:
                break
            time.sleep(0.5)
    print(f"{backend}: {len(seen)} tests in {time.monotonic() - started:.0f} s (log: {log})", flush=True)
    for name in names:
        if name not in seen:
            seen[name] = {"test": name, "outcome": "error", "seconds": 0,
                          "detail": f"no result: the suite's process exited with status {child.returncode}"}
    return seen


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="gloo,hoop")
    parser.add_argument("--world-size", type=int, default=3)
    parser.add_argument("--tests", help="file of test names, one a line")
    parser.add_argument("--log-dir", default="torch-suite")
    args = parser.parse_args()
    backends = args.backends.split(",")
    names = read_names(args.tests) if args.tests else []
    results = {}
    for backend in backends:
        results[backend] = run_backend(backend, args, names)
        names = names or sorted(results[backend])

    print(f"\ntorch {torch_version()}, distributed_test.py, {args.world_size} ranks\n")
    print("| backend | " + " | ".join(OUTCOMES) + " | total |")
    print("|---|" + "---|" * (len(OUTCOMES) + 1))
    for backend in backends:
        counts = [sum(r["outcome"] == o for r in results[backend].values()) for o in OUTCOMES]
        print(f"| {backend} | " + " | ".join(map(str, counts)) + f" | {len(results[backend])} |")

    hoop = results.get("hoop", {})
    let_down = []
    if "gloo" in results and hoop:
        gloo = results["gloo"]
        let_down = [t for t in names if gloo[t]["outcome"] == "passed" and hoop[t]["outcome"] != "passed"]
        only_hoop = [t for t in names if hoop[t]["outcome"] == "passed" and gloo[t]["outcome"] != "passed"]
        print(f"\npass on gloo, not on hoop ({len(let_down)}):")
        for t in let_down:
            print(f"  {t}: {hoop[t]['outcome']}: {error_line(hoop[t]['detail'])}")
        print(f"\npass on hoop only ({len(only_hoop)}):")
        for t in only_hoop:
            print(f"  {t} (gloo: {gloo[t]['outcome']}: {error_line(gloo[t]['detail'])})")
    elif hoop:
        let_down = [t for t in names if hoop[t]["outcome"] in ("failed", "error")]
        print(f"\nfail on hoop ({len(let_down)}):")
        for t in let_down:
            print(f"  {t}: {hoop[t]['outcome']}: {error_line(hoop[t]['detail'])}")
    return 1 if let_down else 0


def error_line(text):
    """The last line of a failure's text that names an error (C++ stack frames follow it)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line or "Exception" in line]
    return (named or lines or [""])[-1][:200]


def torch_version():
    import torch
    return torch.__version__


if __name__ == "__main__":
    sys.exit(main())
