"""core — the nouns every layer passes around, and nothing else.

Records and their versioned file schemas: profile points and tables (`profile`), efficiency
vectors (`efficiency`, with the large-batch fit record in `large_batch` and the noise-scale
record in `noise_scale`, the target's metric in `metric`), plans (`plan`), objectives
(`objective`), run records and training configurations (`run`), the events a run records
(`events`), cap timelines (`cap_history`);
the file header every wattcap file carries (`schema`), defaults shared by the library and the
CLI (`defaults`, `batches`), the cache folder (`cache`), the progress protocol of long jobs
(`progress`), powers as people write them (`power_text`), the error root `WattcapError`
(`errors`) and the version (`version`).

Imports nothing else of wattcap, and no torch.
"""
