#!/usr/bin/env python3
"""PyTorch peer for bench/training_bench.cc's BM_TrainMLP / BM_TrainCNN (one process).

The same models, batch 128, Adam 1e-3, cross-entropy from logits, one synthetic
batch in memory used at every step (as the Strata benchmark):
  mlp: Linear 784-512 ReLU, Linear 512-256 ReLU, Linear 256-10
  cnn: Conv 32 3x3 ReLU, MaxPool 2, Conv 64 3x3 ReLU, MaxPool 2, Flatten,
       Linear 1600-128 ReLU, Linear 128-10 (NCHW, PyTorch's default; --channels-last
       tries torch.channels_last)
PyTorch's best CPU configuration: OMP_WAIT_POLICY=PASSIVE (set here unless the
environment sets it; without it 2 threads spin and halve the rate on a shared
machine) and torch.set_num_threads(--threads). The first --warmup steps are not
timed. Prints one JSON line per model:

  {"peer": "torch_train", "figure": "BM_TrainMLP/threads:1", "model": "mlp", "threads": 1,
   "batch_size": 128, "examples_per_second": <median>, "seconds_per_step": <median>,
   "process_cpu_ms_per_step": <median process CPU time per step>, "runs": [<examples/s of each repetition>], "torch": "1.13.1", "load1": <load average>}

"figure" names the training_bench benchmark measured under the same conditions.

  /usr/bin/python3 bench/peers/torch_train.py --threads 1
  /usr/bin/python3 bench/peers/torch_train.py --threads 2 --models mlp
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # must precede the torch import (libgomp reads it once)

import argparse
import json
import statistics
import time

import torch
import torch.nn as nn

BATCH = 128


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))


def measure(name, args):
    torch.manual_seed(0)
    model = make_model(name)
    x = torch.rand((BATCH, 784) if name == "mlp" else (BATCH, 1, 28, 28))
    y = torch.randint(0, 10, (BATCH,))
    if name == "cnn" and args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    # foreach=True (one multi-tensor kernel per step) is PyTorch 1.13's fastest CPU Adam here: the
    # default per-parameter loop measured 22-32k MLP examples/s at 1 thread, foreach 30-31k.
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    runs, cpu = [], []
    for _ in range(args.repetitions):
        steps, start, cpu_start = 0, time.perf_counter(), time.process_time()
        while True:
            step()
            steps += 1
            elapsed = time.perf_counter() - start
            if elapsed >= args.min_time:
                break
        runs.append(BATCH * steps / elapsed)
        cpu.append((time.process_time() - cpu_start) / steps)
    rate = statistics.median(runs)
    figure = ("BM_TrainMLP" if name == "mlp" else "BM_TrainCNN") + f"/threads:{args.threads}"
    print(json.dumps({"peer": "torch_train", "figure": figure, "model": name, "threads": args.threads,
                      "batch_size": BATCH, "examples_per_second": rate, "seconds_per_step": BATCH / rate,
                      "process_cpu_ms_per_step": 1e3 * statistics.median(cpu), "runs": runs, "torch": torch.__version__,
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                      "channels_last": bool(name == "cnn" and args.channels_last), "adam_foreach": True,
                      "load1": os.getloadavg()[0]}), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=2.0, help="seconds per repetition")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--channels-last", action="store_true", help="CNN in torch.channels_last")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.models.split(","):
        measure(name.strip(), args)


if __name__ == "__main__":
    main()
