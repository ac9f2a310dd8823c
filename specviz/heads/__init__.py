"""The draft heads (Medusa, Hydra, EAGLE, EAGLE-3) and their drafters at inference; training is specviz.training."""
