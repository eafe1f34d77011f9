

def test_a_frozen_pod_cgroup_under_a_node_container_is_thawed(tmp_path) -> None:
    """runc killed while it held a pod's cgroup frozen leaves the kind node unkillable;
    teardown thaws it (v1 freezer.state, v2 cgroup.freeze) before deleting again."""
    from pvchaos.tools.docker_engine import thaw_containers

    v1 = tmp_path / "freezer" / "docker" / "abc" / "kubelet.slice" / "pod1"
    v1.mkdir(parents=True)
    (v1 / "freezer.state").write_text("FROZEN\n")
    (v1.parent / "freezer.state").write_text("THAWED\n")
    v2 = tmp_path / "system.slice" / "docker-def.scope" / "pod2"
    v2.mkdir(parents=True)
    (v2 / "cgroup.freeze").write_text("1\n")
    other = tmp_path / "freezer" / "docker" / "zzz"
    other.mkdir(parents=True)
    (other / "freezer.state").write_text("FROZEN\n")
    assert sorted(thaw_containers(["abc", "def"], root=tmp_path)) == sorted([str(v1), str(v2)])
    assert (v1 / "freezer.state").read_text() == "THAWED" and (v2 / "cgroup.freeze").read_text() == "0"
    assert (other / "freezer.state").read_text() == "FROZEN\n", "another container's cgroup is never touched"
