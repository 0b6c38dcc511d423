"""Training on sqlenv with TRL: the `environment_factory` adapter, SFT warm-up data, the SFT and
GRPO runs driven by a YAML config, and the live-visualisation callback."""
