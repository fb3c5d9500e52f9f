"""The controller's image: what it installs, what it is called, and the CLI without the [sim] extra.

Building the image itself needs a container tool and a registry (or a local base image), so it is
not part of the test run; README "Deploying" says how it was checked. What can be checked here
is that the pieces agree: the Makefile names the image the manifests deploy, the Containerfile
installs only ``[controller]``, and that extra does not pull in the simulator's plotting.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
PLOTTING = ("matplotlib", "tqdm")


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def deployment_image() -> str:
    deploy = yaml.safe_load((ROOT / "manifests" / "deploy" / "deployment.yaml").read_text())
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    return str(container["image"])


def test_the_controller_install_carries_no_plotting_or_progress_bar() -> None:
    runtime = _names(PYPROJECT["project"]["dependencies"]) | _names(
        PYPROJECT["project"]["optional-dependencies"]["controller"]
    )
    assert not runtime & set(PLOTTING)
    assert set(PLOTTING) <= _names(PYPROJECT["project"]["optional-dependencies"]["sim"])
    containerfile = (ROOT / "Containerfile").read_text()
    assert "'.[controller]'" in containerfile and "[sim]" not in containerfile


def test_make_venv_installs_the_sim_extra_that_demo_and_tests_need() -> None:
    make = (ROOT / "Makefile").read_text()
    # the venv's own install (the recipe of $(STAMP)); `make test` may add optional extras after it
    recipe = make.split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]
    (extras,) = re.findall(r"pip install --quiet -e '\.\[([^\]]+)\]'", recipe)
    assert {"controller", "sim", "test"} <= set(extras.split(","))


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_image_builds_the_image_the_manifests_deploy() -> None:
    out = subprocess.run(
        ["make", "-s", "-n", "image", "CONTAINER_TOOL=docker"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    (tag,) = re.findall(r"docker build .* -t (\S+)", out.stdout)
    assert tag == deployment_image() == f"ghcr.io/trainjob-advisor/trainjob-advisor:{VERSION}"
    named = subprocess.run(
        ["make", "-s", "-n", "image", "CONTAINER_TOOL=podman", "IMAGE=registry.example/advisor:dev"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert (
        "podman build -f Containerfile" in named.stdout and "-t registry.example/advisor:dev" in named.stdout
    )


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["forecast", "--demo", "--plot", "out.png"], "matplotlib"),
        (["simulate", "--quiet"], "tqdm"),
    ],
)
def test_without_the_sim_extra_the_cli_names_it_in_one_line(argv: list[str], module: str) -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None; sys.modules['tqdm'] = None\n"
        "from advisor.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"trainjob-advisor {argv[0]}: error: {'--plot' if module == 'matplotlib' else 'the simulator'}"
        f" needs {module}, which is not installed: pip install 'trainjob-advisor[sim]'"
    ]


def test_the_chart_deploys_the_same_image_at_the_package_version() -> None:
    chart_dir = ROOT / "charts" / "trainjob-advisor"
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    values = yaml.safe_load((chart_dir / "values.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == VERSION
    assert f"{values['image']['repository']}:{chart['appVersion']}" == deployment_image()
    for link in ("crds/trainjobforecast.yaml", "crds/advisorpolicy.yaml", "files/clusterrole.yaml"):
        assert (chart_dir / link).is_symlink() and (chart_dir / link).resolve().is_file(), link


def test_the_image_exposes_the_port_the_controller_serves_and_the_manifests_probe() -> None:
    """EXPOSE documents the container's ports: the one `run` serves (metrics and both probes) by
    default, which is the one port the Deployment declares and probes."""
    from advisor.cli import build_parser

    default_port = build_parser().parse_args(["run"]).metrics_port
    (exposed,) = re.findall(r"^EXPOSE (.+)$", (ROOT / "Containerfile").read_text(), re.M)
    deploy = yaml.safe_load((ROOT / "manifests" / "deploy" / "deployment.yaml").read_text())
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    declared = {p["containerPort"] for p in container["ports"]}
    probed = {container[probe]["httpGet"]["port"] for probe in ("livenessProbe", "readinessProbe")}
    assert [int(port) for port in exposed.split()] == [default_port] == sorted(declared)
    assert probed == {p["name"] for p in container["ports"]}
    assert "--liveness" not in " ".join(container["args"])  # kopf's own endpoint, which would need a port
