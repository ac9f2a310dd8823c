"""Token trees as data: building, verifying and accepting them, drafting and grafting trees, the n-gram pool."""
