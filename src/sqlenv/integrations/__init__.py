"""sqlenv played from other RL stacks, each an optional extra that the core install does not need.

- `skyrl_gym_env`: `SQLEnvSkyRL`, a SkyRL-gym `BaseTextEnv` registered as "sqlenv" (the `skyrl`
  extra);
- `verifiers_env`: `load_environment(...)` for verifiers and `vf-eval` (the `verifiers` extra);
- `nemo_gym`: NeMo Gym's OpenEnv resources server over sqlenv's environment, and its task rows
  (the `nemo-gym` extra);
- `verl_tools`: sqlenv's four tools as verl `BaseTool`s for `ToolAgentLoop`, `compute_score`, and
  verl's parquet rows (the `verl` extra);
- `chat_episode`: what SkyRL-gym, verifiers and verl share: one sqlenv episode played as a chat,
  with sqlenv's prompts, tools, reply reading, format-error feedback and reward parts.

Importing a stack's module without its extra raises `sqlenv.extras.MissingExtraError`, naming the
extra and its install command. Nothing here is imported by the rest of the package.
"""
