#!/usr/bin/env python3
"""Java (dma-bench) against C (rma-bench-c, the native anchor) on the same provider, sizes and
window: alternated runs, medians, Java/C ratios against the issue's targets.

    dma-bench/scripts/compare.py                      # tcp, 1 process vs C single, 3 rounds
    dma-bench/scripts/compare.py --mode fork          # --processes 2 vs C -m fork
    dma-bench/scripts/compare.py --rounds 5 --secs 2 --gate --out /tmp/compare.csv

Like with like: Java --processes 1 runs against C -m single (one process), --processes 2 against
-m fork (target in its own process). The C provider is the libfabric provider dma's endpoint
reports (`dma-bench info` -> "provider: net" for dma's tcp on libfabric 1.17). dma writes are
always delivery-complete (fi_writemsg with FI_DELIVERY_COMPLETE), so C writes get -D too
(--no-dc to drop it). The anchor is copied to a scratch directory before `make` (../shared is
read-only in CI). Each point alternates which side runs first, round by round. --endpoint-only adds
a third side, `dma-bench run --endpoint-only` (the provider's endpoint driven with no dma core), to
split Java's distance from C between the endpoint and the core.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEFAULT_ANCHOR = os.path.abspath(os.path.join(ROOT, "..", "shared", "anchors", "rma-bench-c"))
LAUNCHER = os.path.join(ROOT, "bin", "dma-bench")

# (op, size, window, metric, target): metric is what the issue sets a target on.
POINTS = [
    ("write", 65536, 64, "MB/s", 0.95),
    ("read", 65536, 64, "MB/s", 0.95),
    ("write", 1 << 20, 64, "MB/s", 0.95),
    ("read", 1 << 20, 64, "MB/s", 0.95),
    ("write", 4096, 64, "ops/s", 0.85),
    ("read", 4096, 64, "ops/s", 0.85),
    ("write", 64, 1, "lat", 1.20),
    ("read", 64, 1, "lat", 1.20),
]


def cpu_sample():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def idle_fraction(dt=0.25):
    t0, i0 = cpu_sample()
    time.sleep(dt)
    t1, i1 = cpu_sample()
    return (i1 - i0) / max(1, t1 - t0)


def wait_quiet(min_idle, max_wait):
    end = time.monotonic() + max_wait
    while time.monotonic() < end:
        if idle_fraction() >= min_idle:
            return True
    return False


def run(cmd, env, timeout=180):
    """Runs cmd; returns (rc, stdout, stderr, foreign cores during the run)."""
    hz = os.sysconf("SC_CLK_TCK")
    t0, i0 = cpu_sample()
    r0 = os.times()
    w0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = -9, "", f"timeout after {timeout}s"
    w1 = time.monotonic()
    r1 = os.times()
    t1, i1 = cpu_sample()
    busy = ((t1 - t0) - (i1 - i0)) / hz
    ours = (r1.children_user + r1.children_system) - (r0.children_user + r0.children_system)
    return rc, out, err, max(0.0, busy - ours) / max(1e-6, w1 - w0)


def csv_line(out):
    for line in out.splitlines():
        f = line.split(",")
        if len(f) >= 9 and not line.startswith("provider"):
            return f
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", default="tcp", help="dma provider (default tcp)")
    ap.add_argument("--fabric", default=None, help="libfabric provider for C -p (default: ask dma-bench info)")
    ap.add_argument("--mode", choices=["single", "fork"], default="single",
                    help="single: Java --processes 1 vs C -m single; fork: --processes 2 vs -m fork")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=float, default=1.0, help="measured seconds per run")
    ap.add_argument("--warmup", default="500ms", help="dma-bench warm-up per run")
    ap.add_argument("--points", default=None,
                    help="comma list of op:size:window, e.g. write:65536:64,read:64:1 (default: the issue's targets)")
    ap.add_argument("--no-dc", action="store_true", help="C writes without -D (delivery-complete)")
    ap.add_argument("--gate", action="store_true", help="wait for an idle CPU before each run")
    ap.add_argument("--min-idle", type=float, default=0.85)
    ap.add_argument("--max-wait", type=float, default=30.0)
    ap.add_argument("--max-foreign", type=float, default=0.15,
                    help="with --gate: re-run a run during which other processes used more cores than this")
    ap.add_argument("--retries", type=int, default=2, help="with --gate: re-runs of a contaminated run")
    ap.add_argument("--anchor", default=DEFAULT_ANCHOR, help="rma-bench-c source directory")
    ap.add_argument("--out", default=None, help="append raw runs as CSV")
    ap.add_argument("--java-opts", default=os.environ.get("DMA_BENCH_JAVA_OPTS", ""))
    ap.add_argument("--endpoint-only", action="store_true",
                    help="a third side: dma-bench run --endpoint-only (the endpoint with no dma core)")
    a = ap.parse_args()

    points = POINTS
    if a.points:
        points = []
        for p in a.points.split(","):
            op, size, win = p.split(":")
            size, win = int(size), int(win)
            metric, target = ("lat", 1.2) if win == 1 else (("ops/s", 0.85) if size <= 4096 else ("MB/s", 0.95))
            points.append((op, size, win, metric, target))

    # Build both sides first.
    scratch = tempfile.mkdtemp(prefix="rma-bench-c.")
    anchor = os.path.join(scratch, "rma-bench-c")
    shutil.copytree(a.anchor, anchor)
    subprocess.run(["make", "-s", "rma_bench"], cwd=anchor, check=True)
    c_bin = os.path.join(anchor, "rma_bench")
    env = dict(os.environ, DMA_BENCH_JAVA_OPTS=a.java_opts)
    # Build now, once: later runs must not rebuild mid-measurement when someone edits a source.
    subprocess.run([LAUNCHER, "--version"], check=True, env=env, stdout=subprocess.DEVNULL)
    env["DMA_BENCH_NO_BUILD"] = "1"
    info = subprocess.run([LAUNCHER, "info", "--provider", a.provider], capture_output=True, text=True, env=env)
    if info.returncode != 0:
        sys.exit("dma-bench info failed:\n" + info.stdout + info.stderr)
    fabric = a.fabric
    if fabric is None:
        for line in info.stdout.splitlines():
            if line.strip().startswith("provider: "):
                fabric = line.split(":", 1)[1].strip()
                break
    if not fabric:
        sys.exit("could not tell the libfabric provider from dma-bench info; pass --fabric")
    processes = 1 if a.mode == "single" else 2
    print(f"# dma provider {a.provider} = libfabric {fabric}; Java --processes {processes} vs C -m {a.mode}; "
          f"{a.rounds} alternated rounds of {a.secs:g} s; C writes {'without' if a.no_dc else 'with'} -D",
          file=sys.stderr)

    outf = open(a.out, "a") if a.out else None
    if outf and outf.tell() == 0:
        outf.write("side,round,op,size,window,MB/s,ops/s,avg_latency_us,foreign_cores\n")
    res = {}  # (side, op, size, win) -> list of (MB/s, ops/s, lat_us, foreign)
    for rnd in range(a.rounds):
        for i, (op, size, win, metric, target) in enumerate(points):
            c_cmd = [c_bin, "-p", fabric, "-o", op, "-s", str(size), "-w", str(win), "-t", str(a.secs), "-m", a.mode]
            if op == "write" and not a.no_dc:
                c_cmd.append("-D")
            j_cmd = [LAUNCHER, "run", "--provider", a.provider, "--op", op, "--sizes", str(size),
                     "--window", str(win), "--duration", f"{int(a.secs * 1000)}ms", "--warmup", a.warmup,
                     "--processes", str(processes), "--csv", "--no-progress"]
            order = [("C", c_cmd), ("Java", j_cmd)]
            if a.endpoint_only:
                order.append(("Endpoint", j_cmd + ["--endpoint-only"]))
            turn = (rnd + i) % len(order)
            order = order[turn:] + order[:turn]
            for side, cmd in order:
                best = None
                for attempt in range(a.retries + 1 if a.gate else 1):
                    if a.gate:
                        wait_quiet(a.min_idle, a.max_wait)
                    rc, out, err, foreign = run(cmd, env)
                    if rc != 0 or csv_line(out) is None:
                        best = (rc, out, err, foreign)
                        break
                    if best is None or foreign < best[3]:
                        best = (rc, out, err, foreign)
                    if foreign <= a.max_foreign:
                        break
                rc, out, err, foreign = best
                f = csv_line(out)
                if rc != 0 or f is None:
                    print(f"# FAIL {side} {op} {size} w{win}: rc={rc} {err.strip()[-300:]}", file=sys.stderr)
                    continue
                mbps, mops, lat = float(f[6]), float(f[7]), float(f[8])
                res.setdefault((side, op, size, win), []).append((mbps, mops * 1e6, lat, foreign))
                print(f"# round {rnd + 1} {side:8s} {op:5s} {size:>7d} w{win:<3d} {mbps:10.1f} MB/s "
                      f"{mops * 1e6:10.0f} ops/s {lat:9.2f} us  foreign={foreign:.2f}", file=sys.stderr)
                if outf:
                    outf.write(f"{side},{rnd + 1},{op},{size},{win},{mbps},{mops * 1e6},{lat},{foreign:.2f}\n")
                    outf.flush()

    print(f"\nJava/C, {a.provider} ({fabric}), Java --processes {processes} vs C -m {a.mode}, "
          f"medians of {a.rounds} alternated runs of {a.secs:g} s")
    extra_head = " Endpoint | Endpoint/C |" if a.endpoint_only else ""
    print("| op | size | window | metric | C | Java | Java/C | target | met |" + extra_head)
    print("|---|---:|---:|---|---:|---:|---:|---|---|" + ("---:|---:|" if a.endpoint_only else ""))
    for op, size, win, metric, target in points:
        c = res.get(("C", op, size, win), [])
        j = res.get(("Java", op, size, win), [])
        if not c or not j:
            print(f"| {op} | {size} | {win} | {metric} | {'-' if not c else ''} | {'-' if not j else ''} | - | | |")
            continue
        idx = {"MB/s": 0, "ops/s": 1, "lat": 2}[metric]
        cm = statistics.median(x[idx] for x in c)
        jm = statistics.median(x[idx] for x in j)
        ratio = jm / cm if cm else float("nan")
        if metric == "lat":
            met = ratio <= target
            want = f"<= {target:g}"
            unit = "us"
        else:
            met = ratio >= target
            want = f">= {target:g}"
            unit = metric
        extra = ""
        if a.endpoint_only:
            e = res.get(("Endpoint", op, size, win), [])
            em = statistics.median(x[idx] for x in e) if e else float("nan")
            extra = f" {em:,.1f} | {em / cm if cm else float('nan'):.2f} |"
        print(f"| {op} | {size} | {win} | {unit} | {cm:,.1f} | {jm:,.1f} | {ratio:.2f} | {want} | {'yes' if met else 'NO'} |"
              + extra)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
