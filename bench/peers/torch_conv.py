#!/usr/bin/env python3
"""PyTorch peer for bench/kernels_bench.cc's BM_Conv2DForward / BM_Conv2DForwardBackward.

The CNN's two conv layers at batch 128 (3x3, no padding = TF's VALID, stride 1):
  layer 0: input 128x28x28x1  -> 32 filters
  layer 1: input 128x14x14x32 -> 64 filters
Forward alone, forward + backward with gradients for both the input and the
weights (what Strata's benchmark computes: conv2d + both backprops), and each
backprop alone (aten.convolution_backward with one output, the kernel autograd
calls; pairs with BM_Conv2DBackprop/filter:0 and filter:1). float32,
PyTorch's default NCHW layout and CPU backend. Prints the median over
--repetitions of the mean wall-clock and process CPU time per iteration.

  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/torch_conv.py --threads 1
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/torch_conv.py --threads 2
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

LAYERS = {0: ((128, 1, 28, 28), (32, 1, 3, 3)), 1: ((128, 32, 14, 14), (64, 32, 3, 3))}


def time_per_iter(fn, min_time):
    """(wall, process CPU) seconds per iteration; the machine is shared, so both."""
    for _ in range(3):  # warm-up (oneDNN primitive creation, allocator)
        fn()
    iters, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        iters += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / iters, (time.process_time() - cpu_start) / iters


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per repetition")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"mkldnn {torch.backends.mkldnn.is_available()}")
    for layer, (xs, ws) in LAYERS.items():
        x = torch.rand(xs) * 2 - 1
        w = torch.rand(ws) * 2 - 1
        xg = x.clone().requires_grad_(True)
        wg = w.clone().requires_grad_(True)
        y = F.conv2d(x, w)
        dy = torch.rand(y.shape) * 2 - 1

        def forward():
            with torch.no_grad():
                F.conv2d(x, w)

        def forward_backward():
            xg.grad = None
            wg.grad = None
            F.conv2d(xg, wg).backward(dy)

        def backprop(mask):
            def fn():
                with torch.no_grad():
                    torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [0, 0], [1, 1],
                                                        False, [0, 0], 1, mask)
            return fn

        for name, fn in (("forward", forward), ("forward+backward", forward_backward),
                         ("backprop-input", backprop([True, False, False])),
                         ("backprop-filter", backprop([False, True, False]))):
            runs = [time_per_iter(fn, args.min_time) for _ in range(args.repetitions)]
            wall = [r[0] for r in runs]
            cpu = [r[1] for r in runs]
            print(f"layer {layer} {name}: median wall {statistics.median(wall) * 1e3:.2f} ms, "
                  f"cpu {statistics.median(cpu) * 1e3:.2f} ms "
                  f"(wall runs: {', '.join(f'{r * 1e3:.2f}' for r in wall)})")


if __name__ == "__main__":
    main()
