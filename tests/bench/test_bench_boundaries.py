"""The benchmarks drive the product through its public calls only: no module of bench/ touches a
private member of the store, the engine or its runtime (``_connection()``, ``_dsn``, ...). What a
benchmark needs that the product has no call for (a database of its own, a synthetic fill) it does
on a connection of its own, ``common.admin_connection``. Read from the source, so a bench that
would need the product to be running to reach the line is checked too."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import memlane.bench
from memlane.pipeline.engine import Engine
from memlane.pipeline.runtime import Runtime
from memlane.pipeline.store import Store

BENCH = Path(memlane.bench.__file__).parent
# A private attribute reached through a name or attribute called so is the product's, whatever its
# name: ``engine._x``, ``ctx.engine.store._x``, ``engine.runtime._x``.
OWNERS = {"store", "engine", "runtime"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _product_private_names() -> set[str]:
    """Every private method and attribute of Store (all its parts), Engine and Runtime: the names
    their modules define on a class or set on ``self``."""
    files = {
        inspect.getsourcefile(cls)
        for root in (Store, Engine, Runtime)
        for cls in root.__mro__
        if cls.__module__.startswith("memlane.")
    }
    names: set[str] = set()
    for file in files:
        for node in ast.walk(ast.parse(Path(file).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name):
                        names.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        names.add(item.target.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "self" and _private(node.attr):
                    names.add(node.attr)
    return {n for n in names if _private(n)}


def _owner(node: ast.expr) -> str | None:
    """The last name of the expression an attribute is read from: ``store`` for ``ctx.engine.store``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations(source: str, product_private: set[str]) -> list[tuple[int, str]]:
    """(line, what) for every touch of a private member of the product in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = _owner(node.value)
            if owner in ("self", "cls"):
                continue  # the bench's own classes' members
            if owner in OWNERS or node.attr in product_private:
                found.append((node.lineno, ast.unparse(node)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "delattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and (_owner(node.args[0]) in OWNERS or node.args[1].value in product_private)
        ):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


@pytest.fixture(scope="module")
def product_private() -> set[str]:
    names = _product_private_names()
    assert {"_connection", "_dsn", "_configure", "_pool", "_written"} <= names  # (the reader works)
    return names


def test_no_benchmark_touches_a_private_member_of_the_store_engine_or_runtime(product_private):
    modules = sorted(BENCH.glob("*.py"))
    assert {"latency.py", "backupbench.py", "common.py"} <= {m.name for m in modules}
    found = [
        f"bench/{m.name}:{line}: {what}"
        for m in modules
        for line, what in violations(m.read_text(encoding="utf-8"), product_private)
    ]
    assert not found, "the benchmarks must use the product's public calls:\n" + "\n".join(found)


def test_the_check_finds_each_way_of_reaching_in(product_private):
    caught = """
async with engine.store._connection() as conn: pass
dsn = store._dsn
s = ctx.engine.store
s._configure(conn)
ctx.engine._written()
engine.runtime._opened
getattr(s, "_pool")
"""
    assert [line for line, _ in violations(caught, product_private)] == [2, 3, 5, 6, 7, 8]
    allowed = """
class PoolEmbedder:
    def embed(self, texts):
        return self._real.embed(texts)
emb._real.embed_memories(texts)
engine.store.dsn
PostgresServer._instances.get(key)
parser._subparsers
"""
    assert violations(allowed, product_private) == []
