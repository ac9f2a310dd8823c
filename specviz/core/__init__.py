"""The engine and its data: paths, kernels, the KV cache, the model, sampling, acceptance, traces, measures, prompts."""
