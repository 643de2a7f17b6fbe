"""runtime — the Session, the one path every training loop takes, and its parts.

`session.Session` is a facade, built from the typed settings of `session_config` (the plan, the
cap, the goal, checkpointing, reporting, the device's handling); its parts each have one job:
making the plan (`plan_maker`), what is trained (`model_part`), the device side (`device_guard`),
the status shown to progress displays (`session_status`), the cap watchdog and drift monitor
(`watchdog`), following a moving cap (`cap_follower`), the noise-scale measurement and re-plan
(`noise_scale`, `gns_replan`), checkpoints (`checkpoint`), the power meter (`meter`), models
and inputs placed on the device (`model_source`), and batch samplers that follow the Session's
batch size (`sampling`).
"""
