"""pvchaos as a team outside this repository uses it, exactly as docs/writing-suites.md
tells them: `pip install -c requirements.lock <pvchaos>` into a fresh virtualenv, the
example project from that page (read from the page, so the docs cannot drift from what
runs), next to packages of the team's own named `tools`, `kube`, `chaos`, `drivers`,
`clusters` and `conformance`; then the team's plain tests and the pvchaos suite under
plain pytest, and the suite under `pvchaos run PATH` beside a built-in suite, which the
wheel carries (`--suites reclaim`, run outside any checkout). Nothing here imports from
this checkout: the plugin comes from the installed package's `pytest11` entry point.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "writing-suites.md"
OWN_PACKAGES = ("tools", "kube", "chaos", "drivers", "clusters", "conformance")  # names pvchaos once took

OWN_TESTS = '''
    """The team's plain tests of its own packages: they must not notice pvchaos is installed."""

    import chaos, clusters, conformance, drivers, kube, tools


    def test_our_own_packages_are_ours() -> None:
        for package in (tools, kube, chaos, drivers, clusters, conformance):
            assert package.OWNER == "team", package.__file__
'''


def example_files(doc: str) -> dict[str, str]:
    """The files the page marks with `<!-- example-file: PATH -->` before a code block."""
    found = re.findall(r"<!-- example-file: (\S+) -->\n```\w*\n(.*?)\n```", doc, flags=re.S)
    return {path: body + "\n" for path, body in found}


def _venv(root: Path) -> Path:
    """A fresh virtualenv with pvchaos installed (not editable) from a copy of this
    checkout's tracked files, pinned by its lock file as the docs say."""
    source = root / "pvchaos-src"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "-c", str(source / "requirements.lock"), str(source)], check=True, timeout=900, cwd=root)
    return venv


def _project(root: Path) -> Path:
    project = root / "team-storage-tests"
    for path, body in example_files(DOC.read_text(encoding="utf-8")).items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(body)
    for name in OWN_PACKAGES:
        (project / name).mkdir()
        (project / name / "__init__.py").write_text('OWNER = "team"\n')
        (project / name / "versions.py").write_text("NOT_PVCHAOS = True\n")  # pvchaos once imported tools.versions
    (project / "tests" / "test_own_packages.py").write_text(textwrap.dedent(OWN_TESTS))
    return project


def test_the_page_marks_a_whole_project() -> None:
    files = example_files(DOC.read_text(encoding="utf-8"))
    assert set(files) >= {"pytest.ini", "tests/test_volume_scheduling.py"}, sorted(files)
    assert "from pvchaos.api import" in files["tests/test_volume_scheduling.py"]


@pytest.mark.slow
def test_a_teams_project_runs_from_a_fresh_virtualenv_with_plain_pytest_and_pvchaos_run(tmp_path: Path) -> None:
    project = _project(tmp_path)
    venv = _venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV"))}
    env["PVCHAOS_STATE_DIR"] = str(tmp_path / "state")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"

    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "tests", "--zones=2"], cwd=project,
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "6 passed" in out, out[-3000:]
    assert "plugins:" in out and "pvchaos" in out.split("plugins:", 1)[1].splitlines()[0], "loaded by entry point"
    assert "pvchaos summary" in out and re.search(r"^volume_scheduling\s+5\s+0", out, re.M), out[-3000:]

    # The team's suite beside a built-in one (docs/writing-suites.md): the wheel carries the
    # built-in suites, so `--suites reclaim` runs here, far from any checkout, in the same session.
    done = subprocess.run([str(venv / "bin" / "pvchaos"), "run", "tests", "--suites", "reclaim", "--zones", "2",
                           "--workers", "1"], cwd=project, env=env, capture_output=True, text=True, timeout=1200,
                          check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert re.search(r"^(test_)?volume_scheduling\s+5\s+0", out, re.M), out[-3000:]  # Allure names the module
    assert re.search(r"^(test_)?reclaim\s+3\s+0\s+0\s+0", out, re.M), out[-3000:]
    assert (project / "reports" / "html" / "index.html").is_file(), sorted(p.name for p in project.iterdir())

    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "pvchaos" / "kube" / "kinds.py").is_file()
    assert (site / "pvchaos" / "_suites" / "test_reclaim.py").is_file() and not (site / "suites").exists()
    assert (site / "pvchaos" / "_kind_config" / "multizone.yaml").is_file()
    clashes = [n for n in OWN_PACKAGES if (site / n).exists()]
    assert not clashes, f"pvchaos installed top-level packages that shadow a project's own: {clashes}"
    left = [p.name for p in (tmp_path / "state").glob("*") if p.name != ".lock"]  # the registry's lock file stays
    assert not left, f"the runs left clusters behind: {left}"
