"""The server's HTTP routes, one router per resource: `health`, `models` (weights and the
estimation jobs they start), `efficiency` (efficiency vectors), `profiles` and `jobs`."""
