"""`sqlenv train grpo` in one training process and in two (`accelerate launch`), both generating on
one vLLM server (`grpo.vllm_mode: server`, `sqlenv.training.vllm_server`), on this machine.

In one invocation it starts the server (a third process, on the model the run starts from: the
config's SFT output, so run `sqlenv train sft --config CONFIG` first), waits for `/health`, then
runs, one after the other, each as the command a user types (both from that model,
`grpo.init_from`, each in its own folder under `--out`):
- `one` (the baseline): `sqlenv train grpo --config CONFIG`, the config's step in one process;
- `two`: `accelerate launch --config_file configs/accelerate/cpu-2proc.yaml -m sqlenv.cli train
  grpo --config CONFIG`, with the step's rollouts split between the two processes (the config's
  gradient_accumulation_steps halved, so that a step plays as many rollouts as `one`'s);
then stops the server. With `--colocate` it then also runs `colocate`: `one` with
`grpo.vllm_mode: colocate` (TRL's engine inside the trainer: `sqlenv.training.vllm_colocate`),
with the server stopped first (one vLLM engine at a time).

Per run it prints: the wall time of the command; TRL's `step_time` of each step (generation,
scoring and backward: not the optimiser step) from the run's `log_history.json`; the training
reward, the mean completion length and tool calls per rollout (`live/diagnostics.json`); the peak
memory of the run's processes together (sampled every 0.2 s, the server's apart); the weight syncs
the server did (its `POST /collective_rpc` requests: each sync is checked against the policy's
log-probabilities and a run fails on the first that is off). Then the ratio of `two`'s (and
`colocate`'s) wall time and mean step time to `one`'s. The three logs stay in `--out`
(`one.log`, `two.log`, `server.log`; `colocate.log`).

Run: .venv/bin/python benchmarks/bench_grpo_processes.py --config configs/smoke-server.yaml
     [--out runs/item5] [--port 8011] [--colocate] [--set grpo.max_steps=3 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import yaml

from sqlenv.training.config import load_config
from sqlenv.training.vllm_server import running_server, server_command

REPO = Path(__file__).resolve().parents[1]
TWO_PROCESSES = REPO / "configs" / "accelerate" / "cpu-2proc.yaml"


class PeakMemory:
    """The peak of the summed resident memory of a process and all its descendants."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.pid = pid
        self.every_s = every_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                root = psutil.Process(self.pid)
                total = 0
                for process in [root, *root.children(recursive=True)]:
                    try:
                        total += process.memory_info().rss
                    except psutil.NoSuchProcess:
                        continue
                self.peak = max(self.peak, total)
            except psutil.NoSuchProcess:
                return
            self._stop.wait(self.every_s)

    def stop(self) -> int:
        """Stop watching; the peak in bytes."""
        self._stop.set()
        self._thread.join()
        return self.peak


def run(name: str, command: list[str], out: Path) -> dict[str, Any]:
    """Run one training command, its output in `<out>/<name>.log`; its wall time and peak memory."""
    log = out / f"{name}.log"
    print(f"[{name}] {' '.join(command)}", flush=True)
    started = time.perf_counter()
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
        memory = PeakMemory(process.pid)
        code = process.wait()
    wall = time.perf_counter() - started
    peak = memory.stop()
    if code != 0:
        raise SystemExit(f"[{name}] failed ({code}); see {log}")
    return {"wall_s": wall, "peak_gib": peak / 2**30, "log": str(log)}


def read_run(run_dir: Path) -> dict[str, Any]:
    """A finished run's per-step numbers: TRL's log history and the live diagnostics."""
    history = json.loads((run_dir / "grpo" / "log_history.json").read_text(encoding="utf-8"))
    steps = [entry for entry in history if "step_time" in entry]
    diagnostics_file = run_dir / "grpo" / "live" / "diagnostics.json"
    diagnostics = (
        json.loads(diagnostics_file.read_text(encoding="utf-8")) if diagnostics_file.is_file() else []
    )
    return {
        "step_time": [float(entry["step_time"]) for entry in steps],
        "reward": [float(entry.get("reward", float("nan"))) for entry in steps],
        "length": [float(entry.get("completions/mean_length", float("nan"))) for entry in steps],
        "tool_calls": [float(point.get("tool_calls_per_rollout", float("nan"))) for point in diagnostics],
    }


def server_requests(log: Path, since: int) -> tuple[dict[str, int], int]:
    """The server's requests by path after byte `since` of its log, and the log's length now."""
    text = log.read_bytes()
    counts: dict[str, int] = {}
    for path in re.findall(rb'"POST (/[^ ?]*)', text[since:]):
        key = path.decode()
        counts[key] = counts.get(key, 0) + 1
    return counts, len(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/smoke-server.yaml")
    parser.add_argument("--out", default="runs/item5", help="run folders and logs")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--colocate", action="store_true", help="also run one process on a colocated engine")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], help="KEY=VALUE, to every run"
    )
    args = parser.parse_args()

    os.environ.pop("WORLD_SIZE", None)  # the config as one process reads it
    values = {}
    for override in args.overrides:  # as `sqlenv train --set` reads them
        key, _, raw = override.partition("=")
        if key.strip() in ("output_dir", "grpo.init_from"):
            raise SystemExit(
                f"--set {key.strip()}: the benchmark sets it for each run (--out names the folder)"
            )
        values[key.strip()] = yaml.safe_load(raw)
    config = load_config(args.config, values)
    init = config.grpo_init()
    if not Path(init).is_dir():
        raise SystemExit(f"{init} does not exist: run `sqlenv train sft --config {args.config}` first")
    accumulation = config.grpo.gradient_accumulation_steps
    if accumulation % 2:
        raise SystemExit(
            f"grpo.gradient_accumulation_steps is {accumulation}: two processes play the same step with half of it"
        )
    out = (REPO / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{args.port}"
    sets = [item for override in args.overrides for item in ("--set", override)]

    def train(name: str, *extra: str) -> list[str]:
        return [
            "-m", "sqlenv.cli", "train", "grpo", "--config", str(Path(args.config).resolve()),
            "--set", f"output_dir={out / name}", "--set", f"grpo.init_from={Path(init).resolve()}",
            "--set", f"grpo.vllm_server_url={url}", *extra, *sets,
        ]  # fmt: skip

    results: dict[str, dict[str, Any]] = {}
    server_log = out / "server.log"
    print(f"[server] {init} on port {args.port}", flush=True)
    started = time.perf_counter()
    argv, environment = server_command(str(Path(init).resolve()), port=args.port)
    with running_server(argv, environment, url=url, log=server_log) as server:
        print(f"[server] answering after {time.perf_counter() - started:.0f} s", flush=True)
        server_memory = PeakMemory(server.pid)
        _, seen = server_requests(server_log, 0)
        results["one"] = run("one", [sys.executable, *train("one")], out)
        results["one"]["requests"], seen = server_requests(server_log, seen)
        two = [
            sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(TWO_PROCESSES),
            *train("two", "--set", f"grpo.gradient_accumulation_steps={accumulation // 2}"),
        ]  # fmt: skip
        results["two"] = run("two", two, out)
        results["two"]["requests"], seen = server_requests(server_log, seen)
    server_peak = server_memory.stop()
    if args.colocate:
        results["colocate"] = run(
            "colocate", [sys.executable, *train("colocate", "--set", "grpo.vllm_mode=colocate")], out
        )

    print(f"\nserver peak memory {server_peak / 2**30:.1f} GiB; logs in {out}")
    header = f"{'run':<9} {'wall s':>7} {'steps s':>15} {'reward':>13} {'length':>13} {'tools':>11} {'peak GiB':>8} syncs"
    print(header)
    for name, result in results.items():
        numbers = read_run(out / name)
        result.update(numbers)

        def pair(values: list[float], digits: int = 1) -> str:
            return " ".join(f"{value:.{digits}f}" for value in values)

        syncs = result.get("requests", {}).get("/collective_rpc", "-")
        print(
            f"{name:<9} {result['wall_s']:>7.0f} {pair(numbers['step_time']):>15} {pair(numbers['reward'], 2):>13} "
            f"{pair(numbers['length'], 0):>13} {pair(numbers['tool_calls'], 1):>11} {result['peak_gib']:>8.1f} {syncs}"
        )
    base = results["one"]
    for name, result in results.items():
        if name == "one":
            continue
        step = statistics.fmean(result["step_time"]) / statistics.fmean(base["step_time"])
        print(f"{name} / one: wall {result['wall_s'] / base['wall_s']:.2f}x, mean step_time {step:.2f}x")
    (out / "bench.json").write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
