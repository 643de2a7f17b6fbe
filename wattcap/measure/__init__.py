"""measure — profiling jobs: time and power of a model's training step on a device.

`profiling.Profiler` measures the grid (exhaustive, or pruned by the cap) and refreshes rows
when the device drifts; `active_profiling` measures a few points where the cap's frontier is
uncertain and predicts the rest with `wattcap.algorithms.profile_model`; `references` builds and
caches the reference models' profiles that define a device's safe frequency;
`imported_tables` turns a user's measured CSV into a profile or efficiency vector (and a
profile back into that CSV).

Sits below `wattcap.runtime`: a Session may profile when it starts, and its drift monitor
re-measures a row. Uses the device and model boundary, never the runtime.
"""
