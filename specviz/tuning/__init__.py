"""The methods side by side: benches, sweeps, calibration, the latency probe, hardware, the losslessness lab."""
