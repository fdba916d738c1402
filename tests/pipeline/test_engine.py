import pytest

pytestmark = pytest.mark.anyio


async def test_remembered_memory_is_recalled_first(engine):
    await engine.remember({"content": "The user prefers Neovim with the gruvbox theme"})
    await engine.remember({"content": "The billing service stores invoices in PostgreSQL"})
    res = await engine.recall(dict(query="which editor does the user like?"))
    assert res.memories[0][0].content == "The user prefers Neovim with the gruvbox theme"
