"""algorithms — pure functions on core records: they decide, and never touch hardware.

Algorithm 1, the baselines, the fastest-configuration oracle and the power margin
(`planner`, where f*(b) is computed once); objectives and the time/energy Pareto front
(`objectives`); the large-batch fit E(b) = E_min (1 + b/B_noise) (`large_batch`) and the
efficiency vector built from it (`efficiency`); samples to target on the smoothed accuracy
curve (`curves`); noise-scale arithmetic (`noise_scale`); the device model fitted to a few
profile points (`profile_model`).

Imports only `wattcap.core`, numpy and scipy — no torch, so `wattcap plan` never loads it.
"""
