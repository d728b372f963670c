#!/usr/bin/env python3
"""Independent re-derivation of DeviceAssignment.build for device_assignment_test.cc.

Written from the prose of shared/spec/distribute.md §8.3 (not from Strata's C++
and not from TensorFlow's code), in plain Python without numpy. Run it to print
the core assignments that device_assignment_test.cc expects:

    python3 strata/tpu/testdata/device_assignment_reference.py
"""
import math


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

if __name__ == "__main__":
    for mesh, shape, stride, r in CASES:
        print(f"mesh={mesh} shape={shape} stride={stride} num_replicas={r}")
        for i, cores in enumerate(build(mesh, shape, stride, r)):
            print(f"  replica {i}: " + " ".join("{%d,%d,%d,%d}" % c for c in cores))
    print("open ring 4x4:", plane_ring_without_origin(4, 4))
    print("ring3d 4x4x4 positions of z=1 row 0:",
          [ring3d(4, 4, 4).index((x, 0, 1)) for x in range(4)])
