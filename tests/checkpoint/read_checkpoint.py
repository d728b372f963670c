#!/usr/bin/env python3
"""An independent reader of Strata checkpoint files, written from
docs/formats/checkpoint.md alone (Python standard library only).

    read_checkpoint.py --writer <write_known_checkpoint binary>
        runs the writer into a temporary directory, reads its checkpoint and
        compares every value with the ones worked out here (see the writer's
        comment for the rules); exits 0 when all match.
    read_checkpoint.py --dump <checkpoint>
        prints every key with its dtype, shape and values.
"""

import argparse
import math
import os
import struct
import subprocess
import sys
import tempfile

MAGIC = b"\x89STC\r\n\x1a\n"
DTYPES = {1: ("float32", "f", 4), 2: ("float64", "d", 8), 3: ("int32", "i", 4),
          4: ("uint8", "B", 1), 9: ("int64", "q", 8), 10: ("bool", "?", 1)}


def _crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class DataLoss(Exception):
    pass


class Section:
    def __init__(self, data, name):
        self.data, self.name, self.pos = data, name, 0

    def take(self, n, what):
        if n > len(self.data) - self.pos:
            raise DataLoss(f"{self.name}: ends inside {what}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self, what):
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what):
        return struct.unpack("<Q", self.take(8, what))[0]

    def str(self, what):
        return self.take(self.u32(what), what).decode("utf-8")


def read(path):
    """Returns (tensors, graph): tensors maps key -> (dtype, shape, values);
    graph is a list of nodes {children: [(name, id)], attributes: [(name, key)],
    slots: [(original id, slot name, slot id)]}."""
    with open(path, "rb") as f:
        b = f.read()
    size = len(b)
    if size < 64:
        raise DataLoss("shorter than header and footer")
    if b[:8] != MAGIC:
        raise DataLoss("bad header magic")
    footer = size - 48
    if b[footer + 40:] != MAGIC:
        raise DataLoss("bad closing magic")
    if struct.unpack_from("<I", b, footer + 36)[0] != masked(crc32c(b[:16] + b[footer:footer + 36])):
        raise DataLoss("footer CRC")
    version, reserved = struct.unpack_from("<II", b, 8)
    if version != 1:
        raise DataLoss(f"version {version}")
    if reserved != 0 or struct.unpack_from("<I", b, footer + 32)[0] != 0:
        raise DataLoss("reserved field not zero")
    index_offset, index_length, graph_length, index_crc, graph_crc = struct.unpack_from(
        "<QQQII", b, footer)
    if index_offset < 16 or index_offset + index_length + graph_length + 48 != size:
        raise DataLoss("section lengths do not fill the file")
    index_bytes = b[index_offset:index_offset + index_length]
    graph_bytes = b[index_offset + index_length:footer]
    if index_crc != masked(crc32c(index_bytes)):
        raise DataLoss("index CRC")
    if graph_crc != masked(crc32c(graph_bytes)):
        raise DataLoss("object graph CRC")

    tensors = {}
    index = Section(index_bytes, "index")
    expected = 16
    for _ in range(index.u32("tensor count")):
        key = index.str("key")
        code = index.u32("dtype")
        if code not in DTYPES:
            raise DataLoss(f"{key}: dtype {code}")
        name, fmt, width = DTYPES[code]
        shape = [index.u64("dimension") for _ in range(index.u32("rank"))]
        offset, length, crc = index.u64("offset"), index.u64("length"), index.u32("crc")
        count = math.prod(shape)
        if length != count * width or offset != expected or offset + length > index_offset:
            raise DataLoss(f"{key}: bad placement")
        expected = offset + length
        raw = b[offset:offset + length]
        if crc != masked(crc32c(raw)):
            raise DataLoss(f"{key}: tensor CRC")
        if key in tensors:
            raise DataLoss(f"{key}: listed twice")
        tensors[key] = (name, shape, list(struct.unpack("<" + fmt * count, raw)))
    if index.pos != len(index_bytes) or expected != index_offset:
        raise DataLoss("index does not tile the data section")

    graph = []
    g = Section(graph_bytes, "object graph")
    for _ in range(g.u32("node count")):
        children = [(g.str("child name"), g.u32("child id")) for _ in range(g.u32("child count"))]
        attributes = [(g.str("attribute"), g.str("key")) for _ in range(g.u32("attribute count"))]
        slots = [(g.u32("original"), g.str("slot name"), g.u32("slot"))
                 for _ in range(g.u32("slot count"))]
        graph.append({"children": children, "attributes": attributes, "slots": slots})
    if g.pos != len(graph_bytes) or not graph:
        raise DataLoss("object graph size")
    for node in graph:
        for _, child in node["children"]:
            if child >= len(graph):
                raise DataLoss("child id out of range")
        for _, key in node["attributes"]:
            if key not in tensors:
                raise DataLoss(f"attribute key {key} not in the index")
    return tensors, graph


def resolve(graph, path):
    """The node reached from the root by the edge names of `path` ("a/b/c")."""
    node = 0
    for name in path.split("/"):
        matches = [child for edge, child in graph[node]["children"] if edge == name]
        if not matches:
            raise KeyError(f"no edge {name!r} on the way to {path!r}")
        node = matches[0]
    return node


def value_of(tensors, graph, node):
    attributes = dict(graph[node]["attributes"])
    return tensors[attributes["VARIABLE_VALUE"]]


def slot_of(graph, optimizer_node, variable_node, slot_name):
    for original, name, slot in graph[optimizer_node]["slots"]:
        if original == variable_node and name == slot_name:
            return slot
    raise KeyError(f"no slot {slot_name!r} for node {variable_node}")


def f32(x):
    """x rounded to float32, as the C++ side computes in float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def check_known(path):
    tensors, graph = read(path)
    failures = []

    def expect(what, got, dtype, shape, values, tolerance=0.0):
        name, got_shape, got_values = got
        if name != dtype or got_shape != shape or len(got_values) != len(values):
            failures.append(f"{what}: got {name} {got_shape}, expected {dtype} {shape}")
            return
        for i, (g, e) in enumerate(zip(got_values, values)):
            if abs(g - e) > tolerance:
                failures.append(f"{what}[{i}]: got {g!r}, expected {e!r}")

    def variable(p):
        return value_of(tensors, graph, resolve(graph, p))

    expect("w", variable("w"), "float32", [2, 3], [f32(0.25 * i - 1) for i in range(6)])
    expect("step", variable("step"), "int64", [], [42])
    expect("d", variable("d"), "float64", [4], [1 / (i + 1) for i in range(4)])
    expect("flags", variable("flags"), "bool", [3], [True, False, True])
    expect("bytes", variable("bytes"), "uint8", [5], [51 * i for i in range(5)])
    expect("counts", variable("counts"), "int32", [2, 2], [-3, 0, 7, 2147483647])
    expect("inner/v", variable("inner/v"), "float32", [], [3.5])
    # One SGD step (lr 0.1, momentum 0.9) on gradients of ones: m = -0.1, var += m.
    kernel = resolve(graph, "model/layer_with_weights-0/kernel")
    bias = resolve(graph, "model/layer-0/bias")  # the same layer by its other edge
    expect("kernel", value_of(tensors, graph, kernel), "float32", [3, 2],
           [0.1 * i - 0.1 for i in range(6)], 1e-6)
    expect("bias", value_of(tensors, graph, bias), "float32", [2], [0.4, -0.6], 1e-6)
    optimizer = resolve(graph, "optimizer")
    expect("optimizer/iter", variable("optimizer/iter"), "int64", [], [1])
    for name, node, count in (("kernel", kernel, 6), ("bias", bias, 2)):
        slot = slot_of(graph, optimizer, node, "m")
        expect(f"{name} slot m", value_of(tensors, graph, slot), "float32",
               [3, 2] if count == 6 else [2], [-0.1] * count, 1e-6)
    expected_keys = {
        "w/.ATTRIBUTES/VARIABLE_VALUE",
        "model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE",
        "inner/v/.ATTRIBUTES/VARIABLE_VALUE",
    }
    missing = expected_keys - set(tensors)
    if missing:
        failures.append(f"keys missing: {sorted(missing)}")
    # The reader's own checks must catch damage: flip a byte of a tensor.
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[16] ^= 0x01
    damaged = path + ".damaged"
    with open(damaged, "wb") as f:
        f.write(data)
    try:
        read(damaged)
        failures.append("a flipped data byte was not detected")
    except DataLoss:
        pass
    return failures


def main():
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--writer")
    group.add_argument("--dump")
    args = parser.parse_args()
    if crc32c(b"123456789") != 0xE3069283:
        print("CRC-32C self-check failed")
        return 1
    if args.dump:
        tensors, _ = read(args.dump)
        for key, (dtype, shape, values) in sorted(tensors.items()):
            print(f"{key} {dtype} {shape} {values}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "known")
        subprocess.run([args.writer, path], check=True, timeout=60)
        failures = check_known(path)
    for failure in failures:
        print(failure)
    print("OK" if not failures else f"{len(failures)} mismatches")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
