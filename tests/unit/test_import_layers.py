"""The package's layers, read from its import statements (ast, nothing imported): helpers are
shared under public names, nothing below the CLI imports it, and one module imports vLLM."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mmrun"
# The vLLM handle: the one module of mmrun's process that imports vLLM. The other, vLLM's CLI
# for `mmrun serve --api-servers N`, runs only as the server's own process: none imports it.
VLLM_IMPORTER = "mmrun.engine.handle"
SERVER_ENTRY = "mmrun.vllm_cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_submodule(package: str, name: str) -> bool:
    folder = PACKAGE.parent.joinpath(*package.split("."))
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def imports(path: Path) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """Each import in ``path``, at any depth: (line, module, names imported from it)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, tuple(alias.name for alias in node.names)


def package_files() -> list[tuple[str, Path]]:
    return [(module_name(p), p) for p in sorted(PACKAGE.rglob("*.py"))]


def test_the_package_is_found() -> None:
    names = [name for name, _ in package_files()]
    assert VLLM_IMPORTER in names and "mmrun.cli.main" in names and len(names) > 50


def test_no_private_name_is_imported_from_another_module() -> None:
    """A helper one module needs from another gets a public name where it belongs."""
    found = []
    for name, path in package_files():
        for line, module, names in imports(path):
            if not module.startswith("mmrun"):
                continue
            private = [
                n
                for n in names
                if n.startswith("_")
                and n != "__version__"
                and not (is_submodule(module, n) and name.startswith(f"{module}."))
            ]
            if private:
                found.append(f"{name}:{line} imports {', '.join(private)} from {module}")
            # A private module (mmrun.cli._output) is its package's own.
            parts = module.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not name.startswith(".".join(parts[:i])):
                    found.append(f"{name}:{line} imports the private module {module}")
    assert found == []


def test_nothing_below_the_cli_imports_it() -> None:
    found = [
        f"{name}:{line} imports {module}"
        for name, path in package_files()
        if not name.startswith("mmrun.cli") and name != "mmrun.__main__"
        for line, module, _ in imports(path)
        if module == "mmrun.cli" or module.startswith("mmrun.cli.")
    ]
    assert found == []


def test_only_the_engine_handle_imports_vllm() -> None:
    found = [
        f"{name}:{line} imports {module}"
        for name, path in package_files()
        if name not in (VLLM_IMPORTER, SERVER_ENTRY)
        for line, module, _ in imports(path)
        if module == "vllm" or module.startswith("vllm.")
    ]
    assert found == []


def test_no_module_imports_the_server_s_own_entry() -> None:
    found = [
        f"{name}:{line} imports {module}"
        for name, path in package_files()
        for line, module, names in imports(path)
        if module == SERVER_ENTRY or (module == "mmrun" and "vllm_cli" in names)
    ]
    assert SERVER_ENTRY in [name for name, _ in package_files()]
    assert found == []


# What runs prompts: the command line reaches it through mmrun.api only (docs/architecture.md),
# so that the Python API and the commands run the same path. `mmrun serve` starts vLLM's own
# server and waits for it (mmrun.serving), which runs no prompt of mmrun's.
RUNNING = (
    "mmrun.runner",
    "mmrun.batch",
    "mmrun.backends",
    "mmrun.prefetch",
    "mmrun.builder",
    "mmrun.templates",
    "mmrun.engine.handle",
    "mmrun.engine.processes",
    "mmrun.engine.server",
)
SERVE_ONLY = {"mmrun.cli.serve": ("mmrun.engine.server",)}


def runs_prompts(module: str) -> bool:
    return any(module == m or module.startswith(f"{m}.") for m in RUNNING)


def test_the_cli_runs_prompts_through_the_api_only() -> None:
    found = [
        f"{name}:{line} imports {module}"
        for name, path in package_files()
        if name.startswith("mmrun.cli")
        for line, module, _ in imports(path)
        if runs_prompts(module) and module not in SERVE_ONLY.get(name, ())
    ]
    assert found == []


def test_the_cli_rule_sees_an_import_of_the_runner(tmp_path: Path) -> None:
    """The rule above reads nested imports too: it can fail."""
    path = tmp_path / "cli_module.py"
    path.write_text("def run() -> None:\n    from mmrun.runner import run_named\n")
    assert [module for _, module, _ in imports(path) if runs_prompts(module)] == ["mmrun.runner"]
    assert not runs_prompts("mmrun.api") and not runs_prompts("mmrun.batching")
