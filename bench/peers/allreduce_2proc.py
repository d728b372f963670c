#!/usr/bin/env python3
"""All-reduce between 2 processes on loopback, three implementations in one run.

  strata               build/bench/multiworker_allreduce_bench (GlooCollectives over the TCP store)
  gloo_allreduce_ring  build/bench/gloo_allreduce_ring (raw gloo::AllreduceRing<float>, standalone)
  torch                torch.distributed.all_reduce, gloo backend (this script as the worker)

For every repetition, size (MiB of float32) and implementation in turn, two worker processes
are started, each all-reduces (SUM) --iters times after 2 warm-up calls between two barriers,
and rank 0 reports seconds per call. Prints one JSON line per measurement, then medians and
the ratios peer time / strata time (>= 1 means strata is at least as fast):

  flock /work/bench.lock /usr/bin/python3 bench/peers/allreduce_2proc.py [--build build]
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_worker(rank, size, port, mib, iters, warmup):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=size)
    x = torch.full((int(mib * 1024 * 1024 / 4),), 1.0 + rank)
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
        print(json.dumps({"impl": "torch", "mib": mib, "seconds_per_call": seconds,
                          "algbw_mib_s": mib / seconds}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def run_pair(cmd_for_rank, timeout=120):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--sizes", default="1,16,64")
    ap.add_argument("--torch-worker", nargs=5, type=float, metavar=("RANK", "PORT", "MIB",
                                                                    "ITERS", "WARMUP"))
    args = ap.parse_args()
    if args.torch_worker:
        rank, port, mib, iters, warmup = args.torch_worker
        torch_worker(int(rank), 2, int(port), mib, int(iters), int(warmup))
        return
    iters_for = {1: 40, 16: 8, 64: 3}
    results = {}
    for rep in range(args.repetitions):
        for mib in [int(s) for s in args.sizes.split(",")]:
            iters = str(iters_for.get(mib, 4))
            for impl in ("strata", "gloo_allreduce_ring", "torch"):
                port = free_port()
                if impl == "strata":
                    def cmd(r, port=port):
                        return [os.path.join(args.build, "bench", "multiworker_allreduce_bench"),
                                "--rank", str(r), "--size", "2", "--store",
                                f"127.0.0.1:{port}", "--mib", str(mib), "--iters", iters]
                    row = run_pair(cmd)
                elif impl == "gloo_allreduce_ring":
                    with tempfile.TemporaryDirectory() as d:
                        def cmd(r, d=d):
                            return [os.path.join(args.build, "bench", "gloo_allreduce_ring"),
                                    "--rank", str(r), "--size", "2", "--store", d,
                                    "--mib", str(mib), "--iters", iters]
                        row = run_pair(cmd)
                else:
                    def cmd(r, port=port):
                        return [sys.executable, os.path.abspath(__file__), "--torch-worker",
                                str(r), str(port), str(mib), iters, "2"]
                    row = run_pair(cmd)
                row["repetition"] = rep
                print(json.dumps(row), flush=True)
                results.setdefault((mib, impl), []).append(row["seconds_per_call"])
    print(f"load average: {os.getloadavg()}")
    print("| size | strata | raw gloo AllreduceRing | torch gloo | ring/strata | torch/strata |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mib in [int(s) for s in args.sizes.split(",")]:
        med = {impl: statistics.median(results[(mib, impl)])
               for impl in ("strata", "gloo_allreduce_ring", "torch")}
        print(f"| {mib} MiB | {med['strata'] * 1e3:.2f} ms | "
              f"{med['gloo_allreduce_ring'] * 1e3:.2f} ms | {med['torch'] * 1e3:.2f} ms | "
              f"{med['gloo_allreduce_ring'] / med['strata']:.2f} | "
              f"{med['torch'] / med['strata']:.2f} |")


if __name__ == "__main__":
    main()
