"""What vulture (run by `make checks`) cannot see being used. Only framework entry points and
public API belong here, each group with why; dead code is deleted instead."""

# ruff: noqa: B018, F821
# mypy: ignore-errors

# -- framework hooks: called by Lightning, Hugging Face, pickle, sqlite3, torch, signal ----------
_.setup, _.on_train_start, _.on_train_batch_start, _.on_train_batch_end  # Lightning Callback
_.on_validation_end, _.on_fit_end, _.on_exception, _.teardown, _.on_before_backward  # Lightning
_.should_stop  # Lightning's Trainer reads it
_.training_step, _.validation_step, _.configure_optimizers  # a test's LightningModule
_.on_init_end, _.on_train_begin, _.on_step_begin, _.on_step_end, _.on_evaluate, _.on_train_end  # HF
_.should_training_stop  # Hugging Face's TrainerControl reads it
_.on_pre_optimizer_step, _.get_train_dataloader  # HF Trainer (a test's Trainer subclass)
identify  # Flower's ClientApp calls it (@app.query(): the node's partition id)
pytest_collection_modifyitems  # pytest calls it (tests/conftest.py: the longest test files first)
_.persistent_load  # pickle.Unpickler calls it (the safe CIFAR/STL reader refuses it)
_.row_factory  # sqlite3.Connection reads it
_.writeable  # numpy's array flags: read-only shared arrays
_.__signature__  # inspect.signature reads it (the bundled loaders' signatures)
_.benchmark  # torch.backends.cudnn reads it
_.fieldId, _.uiVal  # the fake pynvml's structs, read like the real ones
__getattr__  # the package's lazy `wattcap.Session` (PEP 562)
__context  # pydantic's model_post_init signature
tb, frame, types, batch_idx, out_shape  # parameters a protocol's signature requires
wattcap_cache_dir  # a pytest fixture used for its effect (the cache folder of a test)

# -- public API: what users call, that the package itself does not ------------------------------
_.run_step, _.save_checkpoint  # wattcap.Session (README)
RESNET18, MOBILENETV2, EFFICIENTVIT, DIGITS_CNN, DIGITS32_CNN, CHAR_TRANSFORMER  # model specs

# -- record fields: written to files and API answers for people and other tools ---------------
samples_std, ratio_std  # EfficiencyEntry: the spread over seeds
expected_seconds_per_sample, measured_seconds_per_sample  # DriftEvent
expected_avg_power_w, measured_avg_power_w  # DriftEvent
gradient_sq_rel, trace_sigma_rel  # NoiseScaleEstimate: the estimate's uncertainty
wall_time_s  # RunRecord: wall-clock time beside device time
writes_enabled, updated_at  # the server's Health and JobInfo answers
seeds_a, seeds_b  # TimeComparison: the seeds behind a ratio
at_s  # CapReading: when the cap was read
frontier_hz  # FrontierState: f*(b) per row as the few-point search sees it (for debugging)
sensor_rule  # ProfileTable: how the sensor's rails were chosen (read by people and tools)
