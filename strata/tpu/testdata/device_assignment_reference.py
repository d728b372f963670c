#!/usr/bin/env python3
"""Independent re-derivation of DeviceAssignment.build for device_assignment_test.cc.

Written from the prose of shared/spec/distribute.md §8.3 (not from Strata's C++
and not from TensorFlow's code), in plain Python without numpy. Run it to print
the core assignments that device_assignment_test.cc expects:

    python3 strata/tpu/testdata/device_assignment_reference.py

or, with --fixture, regenerate device_assignment_cases.txt: 300 seeded random
full-mesh cases that DeviceAssignment.MatchesTheReferenceModelOnGeneratedCases
replays. Each line is

    mesh X Y Z C shape a b c d stride e f g h replicas R : x y z c x y z c | ...

with the cores of replica 0 (logical core order), then " | " and replica 1, ...
"""
import math
import os
import random
import sys


def ring_line(n, axis):
    out = []
    for i in range(n):
        p = [0, 0, 0]
        p[axis] = i
        out.append(tuple(p))
    return out


def plane_ring_without_origin(a, b):
    """(u, v) pairs of an a-by-b plane in ring order, (0, 0) left out."""
    out = []
    for pair in range(b // 2):
        out += [(u, 2 * pair) for u in range(1, a)]
        out += [(u, 2 * pair + 1) for u in range(a - 1, 0, -1)]
    out += [(0, v) for v in range(b - 1, 0, -1)]
    return out


def ring3d(X, Y, Z):
    dims = (X, Y, Z)
    if sum(1 for d in dims if d == 1) >= 2:
        axis = max(range(3), key=lambda i: dims[i]) if max(dims) > 1 else 0
        return ring_line(dims[axis], axis)
    if any(d > 1 and d % 2 == 1 for d in dims):
        return [(x, y, z) for z in range(Z) for y in range(Y) for x in range(X)]
    if Z == 1:
        return [(0, 0, 0)] + [(u, v, 0) for u, v in plane_ring_without_origin(X, Y)]
    if Y == 1:
        return [(0, 0, 0)] + [(u, 0, v) for u, v in plane_ring_without_origin(X, Z)]
    if X == 1:
        return [(0, 0, 0)] + [(0, u, v) for u, v in plane_ring_without_origin(Y, Z)]
    out = [(0, 0, 0)]
    for z in range(Z):
        plane = [(u, v, z) for u, v in plane_ring_without_origin(X, Y)]
        out += plane if z % 2 == 0 else plane[::-1]
    out += [(0, 0, z) for z in range(Z - 1, 0, -1)]
    return out


def build(mesh, shape=None, stride=None, num_replicas=1):
    n = len(mesh)
    shape = shape or [1] * n
    stride = stride or [1] * n
    foot = [s * t for s, t in zip(shape, stride)]
    assert all(f <= m for f, m in zip(foot, mesh)), "footprint"
    counts = [(m // f) * t for m, f, t in zip(mesh, foot, stride)]
    max_replicas = math.prod(counts)
    assert num_replicas <= max_replicas, "too many replicas"
    # Visit dims by (count, core first then x, y, z).
    visit = sorted(range(n), key=lambda i: (counts[i], (i + 1) % n))
    rshape = [0] * n
    left, dims_left = num_replicas, n
    for i in visit:
        want = int(math.ceil(left ** (1.0 / dims_left)))
        rshape[i] = min(want, counts[i])
        left = -(-left // rshape[i])
        dims_left -= 1
    ring = shape[3] == mesh[3] and math.prod(stride) == 1 and num_replicas == max_replicas
    result = []
    if ring:
        inner = ring3d(*shape[:3])
        outer = ring3d(*rshape[:3])
        for r in range(num_replicas):
            cores = []
            for k in range(math.prod(shape)):
                ix, iy, iz = inner[k // mesh[3]]
                ox, oy, oz = outer[r]
                cores.append((ox * shape[0] + ix, oy * shape[1] + iy, oz * shape[2] + iz,
                              k % mesh[3]))
            result.append(cores)
        return result
    grid = [(a * stride[0], b * stride[1], c * stride[2], d * stride[3])
            for a in range(shape[0]) for b in range(shape[1])
            for c in range(shape[2]) for d in range(shape[3])]
    for r in range(num_replicas):
        digits = {}
        rest = r
        for axis in (3, 0, 1, 2):
            digits[axis] = rest % rshape[axis]
            rest //= rshape[axis]
        off = [(digits[a] // stride[a]) * foot[a] + digits[a] % stride[a] for a in range(4)]
        result.append([tuple(g[a] + off[a] for a in range(4)) for g in grid])
    return result


CASES = [
    ([2, 2, 1, 2], None, None, 8),
    ([2, 2, 1, 2], [1, 1, 1, 2], None, 4),
    ([2, 2, 1, 2], [1, 1, 1, 2], None, 2),
    ([1, 2, 2, 2], [1, 2, 2, 2], None, 1),
    ([2, 2, 1, 2], [1, 1, 1, 1], [2, 1, 1, 1], 4),
    ([4, 1, 1, 2], [1, 1, 1, 2], [2, 1, 1, 1], 4),
    ([4, 2, 1, 1], None, None, 8),
    ([4, 4, 1, 2], [1, 1, 1, 2], None, 16),
    ([2, 2, 2, 1], None, None, 8),
    ([4, 2, 1, 2], [2, 1, 1, 2], None, 4),
]

def fixture_cases(count=300, seed=20261202):
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        mesh = [rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 4]), rng.choice([1, 2]),
                rng.choice([1, 2])]
        shape = [rng.randint(1, m) for m in mesh]
        stride = [1, 1, 1, 1]
        if rng.random() < 0.3:
            axis = rng.randrange(4)
            stride[axis] = 2
        if any(s * t > m for s, t, m in zip(shape, stride, mesh)):
            continue
        counts = [(m // (s * t)) * t for m, s, t in zip(mesh, shape, stride)]
        max_r = math.prod(counts)
        replicas = rng.choice([max_r, max_r, max(1, max_r // 2), rng.randint(1, max_r)])
        cases.append((mesh, shape, stride, replicas))
    return cases


def write_fixture(path):
    with open(path, "w") as f:
        for mesh, shape, stride, r in fixture_cases():
            head = "mesh %s shape %s stride %s replicas %d" % (
                " ".join(map(str, mesh)), " ".join(map(str, shape)), " ".join(map(str, stride)), r)
            body = " | ".join(" ".join(" ".join(map(str, c)) for c in cores)
                              for cores in build(mesh, shape, stride, r))
            f.write(head + " : " + body + "\n")


if __name__ == "__main__":
    if "--fixture" in sys.argv:
        write_fixture(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "device_assignment_cases.txt"))
        sys.exit(0)
    for mesh, shape, stride, r in CASES:
        print(f"mesh={mesh} shape={shape} stride={stride} num_replicas={r}")
        for i, cores in enumerate(build(mesh, shape, stride, r)):
            print(f"  replica {i}: " + " ".join("{%d,%d,%d,%d}" % c for c in cores))
    print("open ring 4x4:", plane_ring_without_origin(4, 4))
    print("ring3d 4x4x4 positions of z=1 row 0:",
          [ring3d(4, 4, 4).index((x, 0, 1)) for x in range(4)])
