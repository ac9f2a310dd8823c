"""What heads learn from, apart from how they are fitted: ShareGPT, the target's own answers (the committed corpus),
the self-distilled set, teacher-forced features, the held-out set, and the one shard layout they are stored in.
`python -m specviz corpus …` makes them (corpus.cli); specviz.training reads them through corpus.data."""
