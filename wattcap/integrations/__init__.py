"""Integrations with training frameworks, as optional extras: a PyTorch Lightning callback
(`wattcap.integrations.lightning`, `pip install 'wattcap[lightning]'`) and a Hugging Face
`TrainerCallback` (`wattcap.integrations.huggingface`, `pip install 'wattcap[hf]'`). Both drive a
`wattcap.Session`; importing this package imports neither framework."""
