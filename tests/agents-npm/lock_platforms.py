#!/usr/bin/env python3
"""Add the other platforms' optional packages to package-lock.json when the registry that wrote it lacked them.

A registry mirror holding only this platform's builds leaves them out of the lock, and ``npm ci`` then refuses the
lock ("Missing: opencode-darwin-arm64@ from lock file"). Each missing one gets an entry with its version and the
os/cpu/libc its name says, so ``npm ci`` on this platform skips it and elsewhere fetches it.
Run after ``npm install`` here: ``python3 lock_platforms.py``.
"""

import json
from pathlib import Path

LOCK = Path(__file__).resolve().parent / "package-lock.json"


def entry(name: str, version: str) -> dict[str, object]:
    oses = [o for o in ("darwin", "linux", "win32") if o in name] or (["win32"] if "windows" in name else [])
    cpus = [c for c in ("arm64", "x64") if c in name]
    if not oses or not cpus:
        raise SystemExit(f"cannot tell the platform of {name}")
    e: dict[str, object] = {"version": version, "optional": True, "os": oses, "cpu": cpus}
    if oses == ["linux"]:
        e["libc"] = ["musl"] if "musl" in name else ["glibc"]
    return e


def main() -> None:
    lock = json.loads(LOCK.read_text())
    packages = lock["packages"]
    for meta in list(packages.values()):
        for name, version in (meta.get("optionalDependencies") or {}).items():
            if f"node_modules/{name}" not in packages:
                packages[f"node_modules/{name}"] = entry(name, version)
    lock["packages"] = dict(sorted(packages.items(), key=lambda kv: (kv[0] != "", kv[0])))
    LOCK.write_text(json.dumps(lock, indent=2) + "\n")


if __name__ == "__main__":
    main()
