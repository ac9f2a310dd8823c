"""Trained draft heads (Medusa, EAGLE), their self-distillation data and training."""
