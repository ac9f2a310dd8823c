"""What leaves the library: figures (viz), exported images, slide decks, the lineage's content."""
