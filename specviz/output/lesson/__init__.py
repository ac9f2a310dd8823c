"""The lesson: stops read from a TOML file (model), measured once into a pack (record → pack), the facts each stop's
checks read (facts), its figures, slides and deck. Each module imports only those below it (pyproject's contract)."""
