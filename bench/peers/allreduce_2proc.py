#!/usr/bin/env python3
"""All-reduce between 2 processes on loopback: Strata against raw Gloo (and torch), one run.

  strata               build/bench/multiworker_allreduce_bench (GlooCollectives over the TCP store)
  gloo_allreduce_ring  build/bench/gloo_allreduce_ring (raw gloo::AllreduceRing<float>, standalone)
  strata_reduce_scatter  the same Strata program with --collective reduce_scatter (--reduce-scatter)
  torch                torch.distributed.all_reduce, gloo backend (--torch; this script as the worker)
  gloo_sync            gloo_allreduce_ring --sync 1: Gloo's synchronous pairs (--gloo-sync)

For every repetition and size (bytes of float32; 4 = one element) the implementations run in
turn, the order reversed every other repetition. Each measurement starts two worker processes;
each calls the collective (SUM) --iters times after 2 warm-up calls, between two barriers, and
rank 0 reports seconds per call. Prints one JSON line per measurement, then per size the medians
and the median over repetitions of each repetition's ratio peer time / Strata time (>= 1 means
Strata is at least as fast), and with --reduce-scatter the median ratio reduce-scatter time /
all-reduce time:

  flock /work/bench.lock /usr/bin/python3 bench/peers/allreduce_2proc.py [--build build]
      [--sizes 4,4096,65536,1048576,16777216,67108864] [--repetitions 5] [--reduce-scatter]
      [--torch] [--gloo-sync]
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1024 * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def label(nbytes):
    if nbytes <= 4:
        return "1 element"
    if nbytes >= MIB:
        return f"{nbytes / MIB:g} MiB"
    if nbytes >= 1024:
        return f"{nbytes / 1024:g} KiB"
    return f"{nbytes} B"


def iterations(nbytes):
    # About 0.1-0.5 s of calls per measurement on an idle machine.
    if nbytes <= 4096:
        return 2000
    if nbytes <= 65536:
        return 500
    if nbytes <= MIB:
        return 40
    if nbytes <= 16 * MIB:
        return 8
    return 3


def torch_worker(rank, size, port, nbytes, iters, warmup):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size)
    x = torch.full((max(1, nbytes // 4),), 1.0 + rank)
    for _ in range(warmup):
        y = x.clone()
        dist.all_reduce(y)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        y = x.clone()  # strata and raw Gloo keep the input too (out of place)
        dist.all_reduce(y)
    dist.barrier()
    seconds = (time.perf_counter() - start) / iters
    if rank == 0:
        print(json.dumps({"impl": "torch", "bytes": nbytes, "seconds_per_call": seconds}),
              flush=True)
    dist.barrier()
    dist.destroy_process_group()


def run_pair(cmd_for_rank, timeout=300):
    procs = [subprocess.Popen(cmd_for_rank(r), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(2)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{cmd_for_rank(0)[0]} failed ({p.returncode}): {err.strip()}")
    return json.loads(outs[0][0].strip().splitlines()[-1])


def measure(impl, nbytes, args):
    iters = str(iterations(nbytes))
    port = free_port()
    if impl in ("strata", "strata_reduce_scatter"):
        collective = "reduce_scatter" if impl == "strata_reduce_scatter" else "all_reduce"

        def cmd(r):
            return [os.path.join(args.build, "bench", "multiworker_allreduce_bench"),
                    "--rank", str(r), "--size", "2", "--store", f"127.0.0.1:{port}",
                    "--bytes", str(nbytes), "--iters", iters, "--collective", collective]
        return run_pair(cmd)
    if impl in ("gloo_allreduce_ring", "gloo_sync"):
        sync = "1" if impl == "gloo_sync" else "0"
        with tempfile.TemporaryDirectory() as d:
            def cmd(r):
                return [os.path.join(args.build, "bench", "gloo_allreduce_ring"),
                        "--rank", str(r), "--size", "2", "--store", d,
                        "--bytes", str(nbytes), "--iters", iters, "--sync", sync]
            return run_pair(cmd)

    def cmd(r):
        return [sys.executable, os.path.abspath(__file__), "--torch-worker",
                str(r), str(port), str(nbytes), iters, "2"]
    return run_pair(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--sizes", default="4,4096,65536,1048576,16777216,67108864",
                    help="comma-separated sizes in bytes")
    ap.add_argument("--reduce-scatter", action="store_true",
                    help="also time Strata's reduce_scatter of the same tensor")
    ap.add_argument("--torch", action="store_true", help="also time torch.distributed (gloo)")
    ap.add_argument("--gloo-sync", action="store_true",
                    help="also time raw Gloo with synchronous pairs (the caller reads its socket)")
    ap.add_argument("--torch-worker", nargs=5, type=float, metavar=("RANK", "PORT", "BYTES",
                                                                    "ITERS", "WARMUP"))
    args = ap.parse_args()
    if args.torch_worker:
        rank, port, nbytes, iters, warmup = args.torch_worker
        torch_worker(int(rank), 2, int(port), int(nbytes), int(iters), int(warmup))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    impls = ["strata", "gloo_allreduce_ring"]
    if args.reduce_scatter:
        impls.append("strata_reduce_scatter")
    if args.torch:
        impls.append("torch")
    if args.gloo_sync:
        impls.append("gloo_sync")
    times = {}  # (size, impl) -> seconds per call, one per repetition
    loads = []
    for rep in range(args.repetitions):
        loads.append(os.getloadavg()[0])
        for nbytes in sizes:
            for impl in (impls if rep % 2 == 0 else list(reversed(impls))):
                row = measure(impl, nbytes, args)
                row["impl"] = impl
                row["repetition"] = rep
                print(json.dumps(row), flush=True)
                times.setdefault((nbytes, impl), []).append(row["seconds_per_call"])
    loads.append(os.getloadavg()[0])
    print(f"load average (1 min) over the run: {min(loads):.1f}-{max(loads):.1f}")

    def fmt(seconds):
        if seconds < 1e-3:
            return f"{seconds * 1e6:.1f} µs"
        return f"{seconds * 1e3:.2f} ms"

    def ratio(num, den):
        return statistics.median(a / b for a, b in zip(times[num], times[den]))

    head = "| size | Strata all_reduce | raw Gloo AllreduceRing | raw/Strata (median of runs) |"
    rule = "| --- | --- | --- | --- |"
    if args.reduce_scatter:
        head += " Strata reduce_scatter | reduce_scatter/all_reduce |"
        rule += " --- | --- |"
    if args.torch:
        head += " torch gloo | torch/Strata |"
        rule += " --- | --- |"
    if args.gloo_sync:
        head += " raw Gloo, synchronous pairs | sync/Strata |"
        rule += " --- | --- |"
    print(head)
    print(rule)
    for nbytes in sizes:
        med = {impl: statistics.median(times[(nbytes, impl)]) for impl in impls}
        line = (f"| {label(nbytes)} | {fmt(med['strata'])} | {fmt(med['gloo_allreduce_ring'])} | "
                f"{ratio((nbytes, 'gloo_allreduce_ring'), (nbytes, 'strata')):.2f} |")
        if args.reduce_scatter:
            line += (f" {fmt(med['strata_reduce_scatter'])} | "
                     f"{ratio((nbytes, 'strata_reduce_scatter'), (nbytes, 'strata')):.2f} |")
        if args.torch:
            line += (f" {fmt(med['torch'])} | "
                     f"{ratio((nbytes, 'torch'), (nbytes, 'strata')):.2f} |")
        if args.gloo_sync:
            line += (f" {fmt(med['gloo_sync'])} | "
                     f"{ratio((nbytes, 'gloo_sync'), (nbytes, 'strata')):.2f} |")
        print(line)


if __name__ == "__main__":
    main()
