"""OCI runtime wrapper for hosts whose capability bounding set lacks CAP_SYS_RESOURCE.

dockerd asks runc for every capability on `--privileged` containers; when the host's
bounding set does not hold CAP_SYS_RESOURCE, runc fails ("unable to apply caps:
operation not permitted"). This wrapper removes that one capability from the bundle's
config.json (create, run) or from the process file (exec), then execs the real runc
with the same arguments. tools/docker_engine.py installs it (with the interpreter's
shebang) only on such hosts and names the real runc with `--pvchaos-runc=PATH`.
Standard library only: dockerd runs it for every container operation.
"""

import json
import os
import sys

DROPPED = "CAP_SYS_RESOURCE"


def drop_capability(spec: dict, process_only: bool) -> dict:
    """The OCI spec (or process spec) without CAP_SYS_RESOURCE in any capability set."""
    process = spec if process_only else spec.get("process", {})
    for name, caps in (process.get("capabilities") or {}).items():
        if isinstance(caps, list):
            process["capabilities"][name] = [c for c in caps if c != DROPPED]
    return spec


def _rewrite(path: str, process_only: bool) -> None:
    with open(path) as fh:
        spec = json.load(fh)
    with open(path, "w") as fh:
        json.dump(drop_capability(spec, process_only), fh)


def _option(args: list, *names: str) -> str | None:
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def main(argv: list) -> None:
    runc = "runc"
    args = []
    for arg in argv:
        if arg.startswith("--pvchaos-runc="):
            runc = arg.split("=", 1)[1]
        else:
            args.append(arg)
    command = next((a for a in args if a in ("create", "run", "exec")), None)
    if command in ("create", "run"):
        _rewrite(os.path.join(_option(args, "--bundle", "-b") or ".", "config.json"), process_only=False)
    elif command == "exec":
        process = _option(args, "--process", "-p")
        if process:
            _rewrite(process, process_only=True)
    os.execv(runc, [runc, *args])


if __name__ == "__main__":
    main(sys.argv[1:])
