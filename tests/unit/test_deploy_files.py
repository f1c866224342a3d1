"""The deployment files (Dockerfile, docker-compose.yml, deploy/) are valid and agree with the
documented interface of `tuner serve` (docs/guide/deploy.md)."""

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from tuner.engine.server import SERVER_CMD_ENV

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"

# The interface of `tuner serve`: its environment variables and the keys of [serve].
SERVE_ENV = {"TUNER_CONFIG", "TUNER_DB", "TUNER_HOST", "TUNER_PORT", "TUNER_DASHBOARD_TOKEN",
             "TUNER_PROMETHEUS_URL", "TUNER_DRIFT_MARGIN", "TUNER_DRIFT_FOR", "TUNER_DRIFT_EVERY", "TUNER_DRIFT_WINDOW",
             "TUNER_LOG_DIR"}
# The jobs' `tuner optimize` also reads the server command template.
KNOWN_ENV = SERVE_ENV | {SERVER_CMD_ENV}
SERVE_KEYS = {"db", "host", "port", "token", "prometheus", "drift_margin", "drift_for",
              "drift_every", "drift_window", "log_dir"}
MIN_STOP_GRACE_S = 120


def compose_tool() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.mark.parametrize("profile", [None, "postgres"])
def test_compose_tool_accepts_the_file(profile):
    tool = compose_tool()
    if tool is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed (make compose-tool)")
    args = [*tool, "-f", str(COMPOSE)] + (["--profile", profile] if profile else []) + ["config", "-q"]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stderr}"


def with_defaults(text: str) -> str:
    """Compose interpolation as on a host that sets none of the variables: ${VAR:-default}."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(with_defaults(COMPOSE.read_text()))


def seconds(duration: str) -> float:
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts and duration, f"unexpected duration {duration!r}"
    h, m, s = (int(p or 0) for p in parts.groups())
    return h * 3600 + m * 60 + s


def test_tuner_service_gets_the_gpus_and_stops_gracefully(compose):
    tuner = compose["services"]["tuner"]
    devices = tuner["deploy"]["resources"]["reservations"]["devices"]
    assert {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]} in devices
    assert tuner["command"] == ["serve"]
    assert seconds(tuner["stop_grace_period"]) >= MIN_STOP_GRACE_S


def test_results_live_on_a_named_volume(compose):
    mounts = {v.split(":")[1]: v.split(":")[0] for v in compose["services"]["tuner"]["volumes"]}
    assert mounts["/data"] in compose["volumes"]
    env = compose["services"]["tuner"]["environment"]
    assert env["TUNER_DB"].startswith("sqlite:////data/")
    assert env["TUNER_LOG_DIR"].startswith("/data/")


def test_files_mounted_from_deploy_exist(compose):
    sources = [v.split(":")[0] for s in compose["services"].values() for v in s.get("volumes", [])]
    local = [s for s in sources if s.startswith("./deploy/")]
    assert local, "the config files are expected to come from ./deploy/"
    for source in local:
        assert (ROOT / source).is_file(), source


def test_ports_are_published_on_localhost_only_by_default(compose):
    ports = [p for s in compose["services"].values() for p in s.get("ports", [])]
    assert ports
    assert all(p.startswith("127.0.0.1:") for p in ports), ports


def test_postgres_is_optional(compose):
    services = compose["services"]
    assert services["postgres"]["profiles"] == ["postgres"]
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    assert "profiles" not in services["tuner"] and "profiles" not in services["prometheus"]


def test_environment_names_are_the_documented_ones(compose):
    example = (DEPLOY / "env.example").read_text()
    in_example = set(re.findall(r"^#?(TUNER_\w+)=", example, flags=re.M))
    assert in_example <= KNOWN_ENV, in_example - KNOWN_ENV
    assert SERVE_ENV <= in_example, f"not in deploy/env.example: {SERVE_ENV - in_example}"
    in_compose = {k for k in compose["services"]["tuner"]["environment"] if k.startswith("TUNER_")}
    assert in_compose <= KNOWN_ENV, in_compose - KNOWN_ENV


def test_example_config_has_only_documented_serve_keys():
    text = (DEPLOY / "tuner.toml").read_text()
    config = tomllib.loads(text)
    assert set(config) == {"serve"}
    keys = set(config["serve"])
    assert keys <= SERVE_KEYS, keys - SERVE_KEYS
    commented_out = set(re.findall(r"^# ?(\w+) = ", text, flags=re.M))
    assert keys | commented_out == SERVE_KEYS, f"not shown: {SERVE_KEYS - keys - commented_out}"


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = (line.strip() for line in text.splitlines())
    return [tuple(line.split(None, 1)) for line in lines if line and not line.startswith("#")]


def test_dockerfile_builds_on_vllm_and_runs_tuner(compose):
    instructions = dockerfile_instructions()
    args = dict(v.split("=", 1) for k, v in instructions if k == "ARG" and "=" in v)
    base = next(v for k, v in instructions if k == "FROM")
    base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
    assert base.startswith("vllm/vllm-openai:")
    assert json.loads(next(v for k, v in instructions if k == "ENTRYPOINT")) == ["tuner"]
    assert json.loads(next(v for k, v in instructions if k == "CMD"))[0] == "serve"
    # docker-compose.yml passes its own default for the base image: the two must agree.
    assert compose["services"]["tuner"]["build"]["args"]["VLLM_IMAGE"] == args["VLLM_IMAGE"]


def unit_settings() -> dict[str, str]:
    lines = (DEPLOY / "tuner.service").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_systemd_unit_leaves_the_tuner_time_to_stop_its_server():
    unit = unit_settings()
    assert unit["ExecStart"].split()[1:3] == ["serve", "--config"]
    assert unit["KillSignal"] == "SIGTERM"
    assert unit["KillMode"] == "mixed"  # SIGTERM to `tuner serve` only, see the unit's comment
    assert int(unit["TimeoutStopSec"]) >= MIN_STOP_GRACE_S


def test_systemd_unit_verifies(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    # The tuner's virtualenv does not exist here; verify checks that ExecStart is executable.
    text = (DEPLOY / "tuner.service").read_text()
    unit = tmp_path / "specdec-tuner.service"
    unit.write_text(text.replace(unit_settings()["ExecStart"].split()[0], shutil.which("true")))
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Unknown keys and bad values are only warnings, naming the file.
    assert unit.name not in done.stderr, done.stderr


def test_image_and_unit_run_the_installed_package_not_a_checkout():
    # The migrations ship in the wheel (tuner/store/migrations): nothing may point Python at the
    # sources, or the image and the unit would stop proving that a regular install works.
    env_lines = [v for k, v in dockerfile_instructions() if k == "ENV"]
    assert not any("PYTHONPATH" in v for v in env_lines), env_lines
    unit = (DEPLOY / "tuner.service").read_text().splitlines()
    assert not any("PYTHONPATH" in line for line in unit if not line.startswith("#"))
