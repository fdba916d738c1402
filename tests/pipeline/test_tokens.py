"""Token counts: the tokenizer every budget is measured with."""

from memlane.pipeline.tokens import count_tokens


def test_token_counts_match_cl100k_base():
    # "hello world" is two tokens in cl100k_base; an empty string is none.
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
