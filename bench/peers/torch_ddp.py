#!/usr/bin/env python3
"""PyTorch DDP peer for bench/training_bench.cc's BM_MirroredTrainMLP.

The MLP 784-512-256-10 (ReLU, Adam 1e-3, cross-entropy from logits) trained with
DistributedDataParallel over 2 processes x 1 thread each (torch.set_num_threads(1)),
gloo backend over TCP on 127.0.0.1, global batch 128 (64 per process), one
synthetic batch in memory per process used at every step. OMP_WAIT_POLICY=PASSIVE
is set unless the environment sets it. After --warmup untimed steps every
repetition is timed between two barriers on every rank; the rate of a repetition
is 128 * steps / the slowest rank's time. Rank 0 prints one JSON line:

  {"peer": "torch_ddp", "figure": "BM_MirroredTrainMLP/devices:2/threads:1", "model": "mlp",
   "processes": 2, "threads": 1, "backend": "gloo", "batch_size": 128,
   "examples_per_second": <median>, "seconds_per_step": <median>,
   "process_cpu_ms_per_step": <median CPU time of both processes per step>, "runs": [...],
   "torch": "1.13.1", "load1": <load average>}

  /usr/bin/python3 bench/peers/torch_ddp.py
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before the torch import

import argparse
import datetime
import json
import queue as queue_lib
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

GLOBAL_BATCH = 128


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, port, args, queue):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    torch.manual_seed(0)  # identical initial weights on every rank (DDP also broadcasts rank 0's)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3, foreach=True)  # PyTorch 1.13's fastest CPU Adam (see torch_train.py)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1 + rank)
    per_rank = GLOBAL_BATCH // world
    x = torch.rand((per_rank, 784), generator=gen)
    y = torch.randint(0, 10, (per_rank,), generator=gen)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(ddp(x), y).backward()  # DDP all-reduces (averages) the gradients in buckets
        optimizer.step()

    for _ in range(args.warmup):
        step()
    runs, cpu = [], []
    for _ in range(args.repetitions):
        # Rank 0 decides the step count (time-based) and tells the others, so all run the same steps.
        dist.barrier()
        start, cpu_start = time.perf_counter(), time.process_time()
        steps = 0
        while True:
            step()
            steps += 1
            done = torch.tensor([1 if (rank == 0 and time.perf_counter() - start >= args.min_time) else 0])
            dist.broadcast(done, src=0)
            if done.item():
                break
        dist.barrier()
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        cpu_used = torch.tensor([time.process_time() - cpu_start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        dist.all_reduce(cpu_used, op=dist.ReduceOp.SUM)  # both processes' CPU time
        runs.append(GLOBAL_BATCH * steps / elapsed.item())
        cpu.append(cpu_used.item() / steps)
    if rank == 0:
        queue.put((runs, cpu))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=2.0, help="seconds per repetition")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300, help="seconds before giving up on the workers")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, args.processes, port, args, queue)) for r in range(args.processes)]
    for p in procs:
        p.start()
    # A worker that dies (e.g. the port was taken between free_port and bind)
    # would leave the other blocked in gloo: watch them, never wait forever.
    deadline = time.monotonic() + args.timeout
    result = None
    while result is None:
        try:
            result = queue.get(timeout=1)
        except queue_lib.Empty:
            dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if any(p.exitcode == 0 for p in procs):  # one finished: the result is due within seconds
                deadline = min(deadline, time.monotonic() + 30)
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.terminate()
                raise SystemExit(f"torch_ddp: failed (worker exit codes {dead or 'none'}; "
                                 f"timeout {args.timeout} s)")
    runs, cpu = result
    # The figures are in; a worker stuck in gloo's teardown (seen on this loaded
    # VM: destroy_process_group never returning) is ended, not waited for.
    for p in procs:
        p.join(timeout=10)
        if p.exitcode is None:
            p.terminate()
            p.join()
    rate = statistics.median(runs)
    print(json.dumps({"peer": "torch_ddp", "figure": f"BM_MirroredTrainMLP/devices:{args.processes}/threads:{args.threads}",
                      "model": "mlp", "processes": args.processes, "threads": args.threads, "backend": "gloo",
                      "batch_size": GLOBAL_BATCH, "examples_per_second": rate,
                      "seconds_per_step": GLOBAL_BATCH / rate,
                      "process_cpu_ms_per_step": 1e3 * statistics.median(cpu), "runs": runs, "torch": torch.__version__,
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                      "load1": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main()
