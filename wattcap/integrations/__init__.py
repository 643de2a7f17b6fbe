"""Integrations with training frameworks, as optional extras: a PyTorch Lightning callback
(`wattcap.integrations.lightning`, `pip install 'wattcap[lightning]'`) and a Hugging Face
`TrainerCallback` (`wattcap.integrations.huggingface`, `pip install 'wattcap[hf]'`), both
driving a `wattcap.Session`, and a fleet's Flower ClientApp and ServerApp
(`wattcap.integrations.flower`, `pip install 'wattcap[fleet]'`). Importing this package imports
no framework."""
