"""lib's layers (issue 34 item 7): `lib.model` imports nothing above it. Every module of
lib/model is parsed and each import statement, at any depth (inside functions too), must
name `lib.model` or a private helper of the package root (`lib._checks`); and lib.model,
imported on its own in a fresh interpreter, loads no module of lib.train, lib.teach,
lib.widgets or lib.interop. Loading a GGUF file into the decoder is lib.interop.llama_gguf;
the old names (lib.model.llama.load_smollm2 ...) still resolve to it, on request only."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ABOVE = ("lib.train", "lib.teach", "lib.widgets", "lib.interop", "lib.course_data", "lib.doctor")


def imported_modules(source: str, package: str) -> list[str]:
    """Every module an `import` or `from ... import` in `source` names, at any depth;
    relative imports resolved against `package`."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names.append(module)
            if module == "lib":  # from lib import train
                names += [f"lib.{alias.name}" for alias in node.names]
    return names


def test_the_parser_sees_imports_inside_functions():
    old = textwrap.dedent("""
        def load():
            from lib.interop.gguf import read_gguf
            from ..train import gguf_tokenizer
            from lib import teach
    """)
    found = imported_modules(old, "lib.model")
    assert {"lib.interop.gguf", "lib.train", "lib.teach"} <= set(found)


@pytest.mark.parametrize("path", sorted((ROOT / "lib" / "model").glob("*.py")),
                         ids=lambda p: p.name)
def test_lib_model_imports_nothing_above_it(path):
    names = [n for n in imported_modules(path.read_text(), "lib.model") if n.startswith("lib")]
    wrong = [n for n in names if n.startswith(ABOVE) or n == "lib"
             or not (n.startswith("lib.model") or n.startswith("lib._"))]
    assert wrong == [], f"{path.name} imports {wrong}"


def test_lib_model_alone_loads_no_upper_layer():
    code = textwrap.dedent(f"""
        import sys, types
        lib = types.ModuleType("lib")  # the package without its __init__, which loads every layer
        lib.__path__ = [{str(ROOT / "lib")!r}]
        sys.modules["lib"] = lib
        import lib.model, lib.model.llama, lib.model.inspect, lib.model.hooks
        cfg = lib.model.ModernConfig(vocab_size=11, d_model=16, n_layers=1, n_heads=2,
                                     position="rotary")
        lib.model.llama.llama_decoder(cfg)
        print(sorted(m for m in sys.modules if m.startswith({ABOVE!r})))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_old_names_still_work():
    import lib
    import lib.interop.llama_gguf as loader
    import lib.model
    import lib.model.llama

    for name in ("llama_config", "load_llama_gguf", "load_smollm2"):
        new = getattr(loader, name)
        assert getattr(lib, name) is new
        assert getattr(lib.model, name) is new
        assert getattr(lib.model.llama, name) is new
    with pytest.raises(AttributeError):
        lib.model.llama.load_gpt5
