"""experiments — comparisons of methods on measured runs, and what a person reads of them.

`compare` (the harness: baselines, wattcap and the brute-force fastest configuration over
seeds), `significance` (within noise), `report`, `tables`, `plots`, `pareto`, `cap_run` (a run
under a moving cap), `demo` (what `make demo` runs), and fleets: `fleet` (a fleet file checked
and planned), `federation` (its rounds, whatever engine carries them) and `fleet_report`.
"""
