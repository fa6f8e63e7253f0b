"""Shared fixtures for the tests of `lib`.

The helpers below copy `lib`'s weights into PyTorch's own modules. They are
written here, independently of `lib`, so that a test compares two separate
implementations of the same function.
"""

import fnmatch
import hashlib
import pathlib
import re

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def copy_mha(src, dst):
    """lib.MultiHeadAttention -> nn.MultiheadAttention (packed in_proj = [W_q; W_k; W_v])."""
    with torch.no_grad():
        dst.in_proj_weight.copy_(torch.cat([src.w_q.weight, src.w_k.weight, src.w_v.weight]))
        dst.in_proj_bias.copy_(torch.cat([src.w_q.bias, src.w_k.bias, src.w_v.bias]))
        dst.out_proj.weight.copy_(src.w_o.weight)
        dst.out_proj.bias.copy_(src.w_o.bias)


def copy_linear(src, dst):
    with torch.no_grad():
        dst.weight.copy_(src.weight)
        dst.bias.copy_(src.bias)


def copy_encoder_layer(src, dst):
    """lib.EncoderLayer -> nn.TransformerEncoderLayer."""
    copy_mha(src.self_attn, dst.self_attn)
    copy_linear(src.feed_forward.linear1, dst.linear1)
    copy_linear(src.feed_forward.linear2, dst.linear2)
    copy_linear(src.norm1, dst.norm1)
    copy_linear(src.norm2, dst.norm2)


def copy_decoder_layer(src, dst):
    """lib.DecoderLayer -> nn.TransformerDecoderLayer."""
    copy_mha(src.self_attn, dst.self_attn)
    copy_mha(src.cross_attn, dst.multihead_attn)
    copy_linear(src.feed_forward.linear1, dst.linear1)
    copy_linear(src.feed_forward.linear2, dst.linear2)
    for name in ("norm1", "norm2", "norm3"):
        copy_linear(getattr(src, name), getattr(dst, name))


def assert_float16_copy(model, loaded):
    """`loaded` holds `model`'s weights rounded to float16 and stored back in their own
    dtypes (what lib.save_lm_checkpoint / load_lm_checkpoint give)."""
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert b.dtype == a.dtype, name
        assert torch.equal(a.to(torch.float16).to(a.dtype), b), name


def assert_a_changed_byte_is_refused(load, path, digest):
    """Flip one bit near the end of the file at `path`: `load(path, digest)` refuses it."""
    data = bytearray(path.read_bytes())
    data[-10] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        load(path, digest)


def assert_shipped_and_pinned(path, sha256):
    """A checkpoint committed inside `lib`: its bytes hash to `sha256`, and a pattern of
    pyproject.toml's package data for `lib.train` matches it, so installs ship it."""
    path = pathlib.Path(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    root = pathlib.Path(__file__).resolve().parents[1]
    line = re.search(r'^"lib\.train" = \[(.*)\]$', (root / "pyproject.toml").read_text(), re.M)
    patterns = re.findall(r'"([^"]+)"', line.group(1))  # [tool.setuptools.package-data]
    relative = path.relative_to(root / "lib" / "train").as_posix()
    assert any(fnmatch.fnmatch(relative, p) for p in patterns), relative
