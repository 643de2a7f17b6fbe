"""train — jobs on the runtime: training to a target accuracy and the sweeps built on it.

`loop` is wattcap's own training loop (a Session client) and pre-training; `tasks` makes one
training run a task an executor can ship; `executors` runs independent trainings serially, on
local processes or on Ray; `efficiency` estimates r_b with a sweep over batch sizes and seeds
on a proxy; `noise_scale` measures r_b from the gradient noise scale of one run.
"""
