"""pvchaos.tools.gomod: from an upstream go.mod to the wrapper module the control plane is built in.

The wrapper must pin exactly the staging modules the release replaces with ./staging,
keep the release's go/godebug lines, and stay a go.mod that `go` itself accepts. The
slow test checks that against real releases served by the module proxy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pvchaos.tools import gomod

# Shaped like k8s.io/kubernetes' own go.mod (v1.35): header comments, two require
# blocks with `// indirect`, one replace block of staging modules.
K8S_LIKE = """\
// This is a generated file. Do not edit directly.
// Run hack/pin-dependency.sh to change pinned dependency versions.

module k8s.io/kubernetes

go 1.25.0

godebug default=go1.25

require (
\tbitbucket.org/bertimus9/systemstat v0.5.0
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

require (
\tgithub.com/kylelemons/godebug v1.1.0 // indirect
\tgo.etcd.io/etcd/client/v3 v3.6.5 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
\t// a comment inside the block
\tk8s.io/client-go => ./staging/src/k8s.io/client-go // trailing comment
\tk8s.io/streaming => ./staging/src/k8s.io/streaming
)

replace github.com/onsi/ginkgo/v2 => github.com/onsi/ginkgo/v2 v2.21.0

replace sigs.k8s.io/yaml => github.com/example/yaml v1.4.1
"""

STAGING = ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/streaming")


def replaces_in(text: str) -> dict[str, str]:
    """`old => new` pairs of a go.mod, read independently of the code under test."""
    found = {}
    for m in re.finditer(r"^\s*(?:replace\s+)?(\S+)\s+=>\s+(\S+(?:\s+v\S+)?)", text, re.MULTILINE):
        if not m.group(1).startswith("//"):
            found[m.group(1)] = m.group(2)
    return found


def go_accepts(text: str, tmp_path: Path) -> dict[str, Any]:
    """`go mod edit -json` parses a go.mod offline; its JSON is the structure go sees."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain on PATH")
    (tmp_path / "go.mod").write_text(text)
    proc = subprocess.run([go, "mod", "edit", "-json"], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, GOFLAGS=""), check=False)
    assert proc.returncode == 0, f"go rejects the wrapper: {proc.stderr}\n{text}"
    return json.loads(proc.stdout)


def test_parse_reads_go_godebug_and_staging_replaces() -> None:
    mod = gomod.parse_upstream_mod(K8S_LIKE)
    assert mod.go_version == "1.25.0"
    assert mod.godebug_lines == ("godebug default=go1.25",)
    assert mod.local_replaces == STAGING
    assert set(mod.other_replaces) == {
        "github.com/onsi/ginkgo/v2 => github.com/onsi/ginkgo/v2 v2.21.0",
        "sigs.k8s.io/yaml => github.com/example/yaml v1.4.1",
    }


def test_parse_without_go_line_is_refused() -> None:
    with pytest.raises(ValueError, match="no 'go' line"):
        gomod.parse_upstream_mod("module x\n\nrequire a v1.0.0\n")


def test_parse_of_a_mod_without_replaces() -> None:
    mod = gomod.parse_upstream_mod("module sigs.k8s.io/kwok\n\ngo 1.24.0\n\nrequire a v1.0.0\n")
    assert (mod.go_version, mod.godebug_lines, mod.local_replaces, mod.other_replaces) == ("1.24.0", (), (), ())


def test_forbidden_dependency_guards_are_not_staging_modules() -> None:
    text = K8S_LIKE + "\nreplace (\n\tgo.etcd.io/etcd => ./FORBIDDEN_DEPENDENCY\n)\n" \
                      "\nreplace go.etcd.io/etcd/v3 => ./FORBIDDEN_DEPENDENCY\n"
    mod = gomod.parse_upstream_mod(text)
    assert mod.local_replaces == STAGING
    assert "go.etcd.io/etcd" not in gomod.kubernetes_wrapper_mod("v1.35.4", mod)


def test_godebug_block_survives_whole(tmp_path: Path) -> None:
    text = K8S_LIKE.replace("godebug default=go1.25", "godebug (\n\tdefault=go1.25\n\twinsymlink=0\n)")
    wrapper = gomod.kubernetes_wrapper_mod("v1.35.4", gomod.parse_upstream_mod(text))
    parsed = go_accepts(wrapper, tmp_path)
    assert {(g["Key"], g["Value"]) for g in parsed.get("GoDebug") or []} == {("default", "go1.25"),
                                                                              ("winsymlink", "0")}


def test_versioned_and_commented_replaces_are_kept() -> None:
    text = K8S_LIKE + ("\nreplace (\n\tgithub.com/a/b v1.0.0 => github.com/a/b v1.0.1\n)\n"
                       "\nreplace github.com/c/d => github.com/c/d v0.3.0 // pinned for a CVE\n")
    kept = gomod.parse_upstream_mod(text).other_replaces
    assert any(r.startswith("github.com/a/b") for r in kept)
    assert any(r.startswith("github.com/c/d") for r in kept)


def test_wrapper_pins_each_staging_module_and_keeps_the_rest(tmp_path: Path) -> None:
    wrapper = gomod.kubernetes_wrapper_mod("v1.35.4", gomod.parse_upstream_mod(K8S_LIKE))
    parsed = go_accepts(wrapper, tmp_path)
    assert parsed["Module"]["Path"] == "pvchaos.local/k8sbuild"
    assert parsed["Go"] == "1.25.0"
    assert parsed["GoDebug"] == [{"Key": "default", "Value": "go1.25"}]
    assert parsed["Require"] == [{"Path": "k8s.io/kubernetes", "Version": "v1.35.4"}]
    got = {r["Old"]["Path"]: (r["New"]["Path"], r["New"].get("Version")) for r in parsed["Replace"]}
    assert got == {
        **{m: (m, "v0.35.4") for m in STAGING},
        "github.com/onsi/ginkgo/v2": ("github.com/onsi/ginkgo/v2", "v2.21.0"),
        "sigs.k8s.io/yaml": ("github.com/example/yaml", "v1.4.1"),
    }


@pytest.mark.parametrize(("k8s", "staging"), [("v1.35.4", "v0.35.4"), ("v1.34.4", "v0.34.4"),
                                              ("v1.37.12", "v0.37.12"), ("v1.38.0-beta.0", "v0.38.0-beta.0"),
                                              ("v1.36.0-rc.1", "v0.36.0-rc.1")])
def test_staging_version(k8s: str, staging: str) -> None:
    assert gomod.staging_version(k8s) == staging


@pytest.mark.parametrize("bad", ["1.35.4", "v1.35", "v2.0.0", "v1.35.4-gke.1", "v1.38.0-beta", ""])
def test_staging_version_refuses_non_releases(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes release version"):
        gomod.staging_version(bad)


def test_version_ldflags_stamp_both_version_packages() -> None:
    flags = gomod.version_ldflags("v1.35.4", git_commit="abc123")
    assert flags.startswith("-s -w ")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for want in ("gitVersion=v1.35.4", "gitMajor=1", "gitMinor=35", "gitTreeState=clean",
                     "gitCommit=abc123"):
            assert f"-X {pkg}.{want}" in flags
    assert "gitCommit" not in gomod.version_ldflags("v1.35.4")
    assert "-X k8s.io/component-base/version.gitVersion=v1.38.0-beta.0" in gomod.version_ldflags("v1.38.0-beta.0")
    with pytest.raises(ValueError):
        gomod.version_ldflags("latest")


def served_gomod(module: str, version: str, workdir: Path) -> str:
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain on PATH")
    proc = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], cwd=workdir,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, GOFLAGS="-mod=mod"), check=False)
    assert proc.returncode == 0, f"go mod download {module}@{version}: {proc.stdout or proc.stderr}"
    return Path(json.loads(proc.stdout)["GoMod"]).read_text()


@pytest.mark.slow
@pytest.mark.parametrize("version", ["v1.34.4", "v1.37.2"])
def test_wrapper_of_a_real_release_pins_exactly_its_staging_modules(version: str, tmp_path: Path) -> None:
    upstream = served_gomod("k8s.io/kubernetes", version, tmp_path)
    staged = {old for old, new in replaces_in(upstream).items() if new.startswith("./staging/")}
    assert len(staged) > 20, f"{version}: suspiciously few staging replaces: {sorted(staged)}"
    if re.search(r"^\s*k8s\.io/streaming\s+=>\s+\./staging/", upstream, re.MULTILINE):
        assert "k8s.io/streaming" in staged

    wrapper = gomod.kubernetes_wrapper_mod(version, gomod.parse_upstream_mod(upstream))
    (tmp_path / "w").mkdir()
    parsed = go_accepts(wrapper, tmp_path / "w")
    pinned = {r["Old"]["Path"]: (r["New"]["Path"], r["New"].get("Version")) for r in parsed["Replace"]}
    sv = gomod.staging_version(version)
    assert {m for m, (new, v) in pinned.items() if new == m and v == sv} == staged
    go_line = re.search(r"^go\s+(\S+)", upstream, re.MULTILINE)
    assert go_line and parsed["Go"] == go_line.group(1)


def test_a_standin_replaces_only_the_module_a_version_requires() -> None:
    text = ("module k8s.io/kubernetes\n\ngo 1.27.0\n\nrequire (\n\tsigs.k8s.io/iptables-wrappers v1.0.0\n"
            "\tk8s.io/klog/v2 v2.130.1 // indirect\n)\n")
    assert gomod.requires(text, "sigs.k8s.io/iptables-wrappers") and gomod.requires(text, "k8s.io/klog/v2")
    assert not gomod.requires(text, "sigs.k8s.io/iptables")
    wrapper = gomod.kubernetes_wrapper_mod("v1.38.0-beta.0", gomod.parse_upstream_mod(text),
                                           {"sigs.k8s.io/iptables-wrappers": "/s/iptables-wrappers"})
    assert "\tsigs.k8s.io/iptables-wrappers => /s/iptables-wrappers\n" in wrapper
    assert "=> /s/" not in gomod.kubernetes_wrapper_mod("v1.35.4", gomod.parse_upstream_mod(text))
