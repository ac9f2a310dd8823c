"""Long-context prompts of an exact length: a real document cut to fit, then a question about it.

A context of N tokens is the chat-templated user turn "<a stretch of the long document>\n\n<question>",
N tokens in all, template included. Row b of a batch starts its stretch b · 211 tokens into the document
(wrapping round), and asks the b-th question (cycled), so no two rows of a batch share their text. The
document (specviz/data/long_document.txt) is two licenses, copied verbatim: real prose, about 9,900
tokens, which both of them allow anyone to copy unchanged.
"""

from __future__ import annotations

from functools import lru_cache

from specviz.core.model import LoadedModel
from specviz.core.paths import LONG_DOCUMENT
from specviz.core.sampling import ConfigError

QUESTIONS = (
    "Summarise the text above in three sentences.",
    "Which obligations does the text above place on someone who shares the work? List them.",
    "Quote the sentence above that best explains what the license is for, then explain it.",
    "List every defined term in the text above, with its definition in a few words.",
    "Explain the text above to a first-year student in one paragraph.",
    "What does the text above say about patents? Answer with quotations.",
    "Write five questions a lawyer might ask about the text above.",
    "Rewrite the last paragraph above in plain English.",
)
ROW_OFFSET = 211  # tokens between two rows' starting points in the document
TOLERANCE = 2  # a context may come out this many tokens short of the length asked for
MIN_CONTEXT = 64  # below this the question and the template leave no room for the document


@lru_cache(maxsize=1)
def _document() -> str:
    return LONG_DOCUMENT.read_text(encoding="utf-8")


def document_ids(lm: LoadedModel) -> list[int]:
    """The long document's token ids (the model's tokenizer, no template)."""
    return list(lm.tokenizer(_document())["input_ids"])


def limit(lm: LoadedModel, max_new_tokens: int, margin: int = 64) -> int:
    """The longest context that leaves room for the new tokens and a step's drafts within the model's positions."""
    return int(lm.hf.config.max_position_embeddings) - max_new_tokens - margin


def check(lengths: list[int], lm: LoadedModel | None = None, max_new_tokens: int = 0) -> None:
    """ConfigError unless every length is at least MIN_CONTEXT and (given the model) fits its positions."""
    if not lengths or min(lengths) < MIN_CONTEXT:
        raise ConfigError(f"--context takes lengths of at least {MIN_CONTEXT} tokens, like 128,512,2048.")
    if lm is not None and max(lengths) > (top := limit(lm, max_new_tokens)):
        raise ConfigError(
            f"A context of {max(lengths)} tokens leaves no room for {max_new_tokens} new tokens in the model's "
            f"{lm.hf.config.max_position_embeddings} positions; the longest here is {top}."
        )


def _fit(doc: list[int], lm: LoadedModel, length: int, row: int) -> list[int]:
    question = QUESTIONS[row % len(QUESTIONS)]
    start = (row * ROW_OFFSET) % len(doc)
    cyclic = doc[start:] + doc[:start]
    take, best = length, None
    for _ in range(6):  # decoding a cut and re-encoding it can shift a token or two: converge on the length
        text = lm.tokenizer.decode(list(cyclic[: max(0, take)]), skip_special_tokens=True)
        ids = lm.encode_prompt(f"{text}\n\n{question}", chat=True)
        if len(ids) == length:
            return ids
        if length - TOLERANCE <= len(ids) < length and take > 0:
            best = ids  # a token or two short; keep trying for exact
        take += length - len(ids)
    if best is None:
        raise ConfigError(f"Could not build a {length}-token context from the document (got {len(ids)}).")
    return best


def context_prompts(lm: LoadedModel, length: int, batch: int) -> list[list[int]]:
    """`batch` different prompts of about `length` tokens each (the document is tokenised once)."""
    doc = document_ids(lm)
    return [_fit(doc, lm, length, b) for b in range(batch)]
