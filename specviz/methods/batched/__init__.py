"""Batched decoding: B prompts in one forward per step, each row accepting its own number of tokens.

The KV cache: one shared, padded slot axis (specviz.core.slot_cache.SlotCache), and per row a mask of
the slots it holds. Rows differ in length from the prefill on (prompts are left-padded) and drift further
apart with every step, because each accepts its own number of drafts. Three ways to keep that exact:

- per-row caches, one forward each: correct, but no batching at all;
- a ragged (paged) cache with a varlen attention kernel: what serving systems do, but transformers'
  public API has no such kernel for a CPU, and forking its attention is what we refuse to do;
- one rectangular cache [B, heads, S, d] with an explicit 4D mask [B, 1, q, S + q] over it: every row's
  block of new slots is appended at the same slot index, each row attends only the slots it holds, and
  each row's position ids are its own sequence length, so the keys are rotated as in a one-row run.

We take the third. A step appends a block as wide as the widest row's chain or tree (narrower rows'
extra slots are pads nobody attends); after acceptance each row's accepted path is packed to the front
of the block (a few slots copied per layer, as tree.commit_path does for one row) and the block is cut
to the longest path, so plain decoding wastes no slot at all and a row that accepted less leaves a few
masked holes. When the holes add up (a quarter of the slot axis beyond the longest row, at least 32
slots) the cache is compacted: every row's held slots gathered together, one O(context) copy, which
costs about what one step's attention already reads. A finished row (EOS or its budget) leaves the
batch at once: its rows are dropped from every cache, so later steps run only the live ones.

Greedy (T = 0) only, for now. Each row's output equals that prompt decoded alone by plain decoding,
token for token (tests/methods/test_batched.py): the mask makes every row's attention the one-row attention,
up to the order of floating-point sums.
"""
